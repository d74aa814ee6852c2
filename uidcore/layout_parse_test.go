package uidcore

import (
	"strings"
	"testing"
)

func TestParseLayout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Layout
	}{
		{"default", DefaultLayout()},
		{" UidGenerator ", UidGeneratorLayout()},
		{"31/10/22", DefaultLayout()},
		{"28/22/13@2016-05-20T00:00:00+08:00", UidGeneratorLayout()},
		{UidGeneratorLayout().String(), UidGeneratorLayout()},
		{"JSSafe", JSSafeLayout()},
		{"31/6/16", JSSafeLayout()},
		{JSSafeLayout().String(), JSSafeLayout()},
		// A bare date is midnight UTC, as UidGenerator's epochStr means it.
		{"31/10/22@2026-01-01", DefaultLayout()},
		{" 31/6/16 @ 2026-01-01 ", JSSafeLayout()},
		{"28/22/13@2016-05-19T16:00:00Z", UidGeneratorLayout()},
	} {
		got, err := ParseLayout(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseLayout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "snowflake", "31/16", "31/16/16/0", "31/x/16", "31/16/17", "32/10/22", "31/16/16@yesterday", "31/16/16@1960-01-01T00:00:00Z", "-1/32/32", "31/10/22@2026-1-1", "31/10/22@2026-13-01", "31/10/22@1960-01-01", "31/10/22@20260101"} {
		if l, err := ParseLayout(in); err == nil || !strings.Contains(err.Error(), "layout") {
			t.Errorf("ParseLayout(%q) = %v, %v; want an error naming the layout", in, l, err)
		}
	}
}

// FuzzParseLayout: whatever it accepts is a valid layout that reads back
// the same from its String form.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"default", "uidgenerator", "31/16/16", "28/22/13@2016-05-20T00:00:00+08:00", "20/21/22@1970-01-01T00:00:00Z", "1/1/61", "31/16/16@", "jssafe", "31/6/16@2030-02-03T04:05:06-07:00", "31/10/22@2026-01-01", "28/22/13@2016-05-20", "31/10/22@2026-02-30", "31/10/22@0000-01-01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			return
		}
		if verr := l.Validate(); verr != nil {
			t.Fatalf("%q: accepted an invalid layout %v: %v", s, l, verr)
		}
		back, err := ParseLayout(l.String())
		if err != nil || !back.Equal(l) || back.String() != l.String() {
			t.Fatalf("%q: %v does not read back from %q: %v, %v", s, l, l.String(), back, err)
		}
	})
}

// An epoch given with an offset prints in it (and in UTC), while the
// layout's String, which the fleet identity records, stays in UTC.
func TestLayoutEpochKeepsItsOffsetForMessages(t *testing.T) {
	l, err := ParseLayout("28/22/13@2016-05-20T00:00:00+08:00")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.EpochText(), "2016-05-20T00:00:00+08:00 (2016-05-19T16:00:00Z)"; got != want {
		t.Errorf("EpochText() = %q, want %q", got, want)
	}
	if got, want := l.String(), "28/22/13@2016-05-19T16:00:00Z"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := DefaultLayout().EpochText(), "2026-01-01T00:00:00Z"; got != want {
		t.Errorf("default EpochText() = %q, want %q", got, want)
	}
	if got := UidGeneratorLayout().ParseUID(1 << 63).Wrapped; !strings.Contains(got, "sign bit at 2024-11-20T21:24:16+08:00 (2024-11-20T13:24:16Z)") {
		t.Errorf("wrapped: %q", got)
	}
}

// A layout says its epoch when it is a preset or carries @epoch: what a
// Uid-Layout header must do.
func TestHasEpoch(t *testing.T) {
	for in, want := range map[string]bool{
		"uidgenerator": true, " JSSafe ": true, "default": true,
		"31/10/22@2026-01-01": true, "28/22/13@2016-05-20T00:00:00+08:00": true,
		"28/22/13": false, "31/10/22": false, "": false, "snowflake": false,
	} {
		if got := HasEpoch(in); got != want {
			t.Errorf("HasEpoch(%q) = %v, want %v", in, got, want)
		}
	}
}
