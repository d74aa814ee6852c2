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
	} {
		got, err := ParseLayout(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLayout(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "snowflake", "31/16", "31/16/16/0", "31/x/16", "31/16/17", "31/16/16@yesterday", "31/16/16@1960-01-01T00:00:00Z", "-1/32/32"} {
		if l, err := ParseLayout(in); err == nil || !strings.Contains(err.Error(), "layout") {
			t.Errorf("ParseLayout(%q) = %v, %v; want an error naming the layout", in, l, err)
		}
	}
}

// FuzzParseLayout: whatever it accepts is a valid layout that reads back
// the same from its String form.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"default", "uidgenerator", "31/16/16", "28/22/13@2016-05-20T00:00:00+08:00", "20/21/22@1970-01-01T00:00:00Z", "1/1/61", "31/16/16@"} {
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
		if err != nil || back != l {
			t.Fatalf("%q: %v does not read back from %q: %v, %v", s, l, l.String(), back, err)
		}
	})
}
