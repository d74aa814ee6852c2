package natsconn

import (
	"testing"
	"time"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"2.9.10": {2, 9, 10}, "v2.10.23": {2, 10, 23}, "2.11.0-beta.1": {2, 11, 0}, " 2.15.2 ": {2, 15, 2}, "3.0.0+build": {3, 0, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "2.9", "2.x.1", "2.9.-1", "two.nine.ten", "2.9.10.1"} {
		if v, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %v, want an error", bad, v)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	ordered := []Version{{2, 9, 10}, {2, 9, 20}, MinReplicatedCAS, {2, 10, 0}, {2, 10, 22}, MinRecommended, {2, 15, 2}, {3, 0, 0}}
	for i := range ordered {
		for j := range ordered {
			if got := ordered[i].Less(ordered[j]); got != (i < j) {
				t.Errorf("%v.Less(%v) = %v", ordered[i], ordered[j], got)
			}
		}
	}
}

func TestParseVarzSync(t *testing.T) {
	for name, c := range map[string]struct {
		reply  string
		want   SyncPolicy
		wantOK bool
	}{
		"always":   {`{"data":{"server_name":"n1","jetstream":{"config":{"sync_interval":120000000000,"sync_always":true}}}}`, SyncPolicy{Always: true, Interval: 2 * time.Minute, Server: "n1"}, true},
		"interval": {`{"data":{"server_name":"n2","jetstream":{"config":{"sync_interval":120000000000}}}}`, SyncPolicy{Interval: 2 * time.Minute, Server: "n2"}, true},
		"2.9":      {`{"data":{"server_name":"old","jetstream":{"config":{"max_memory":1}}}}`, SyncPolicy{Server: "old"}, true},
		"no js":    {`{"data":{"server_name":"n3"}}`, SyncPolicy{}, false},
		"error":    {`{"error":{"code":403}}`, SyncPolicy{}, false},
		"garbage":  {`nope`, SyncPolicy{}, false},
	} {
		got, ok := parseVarzSync([]byte(c.reply))
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: parseVarzSync = %+v, %v; want %+v, %v", name, got, ok, c.want, c.wantOK)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"2.9.10", "v2.10.23", "2.11.0-beta.1", "", "1.2", "9999999999999999999.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("ParseVersion(%q) = %v: negative", s, v)
		}
		if back, err := ParseVersion(v.String()); err != nil || back != v {
			t.Fatalf("ParseVersion(%q) = %v, which reads back as %v, %v", s, v, back, err)
		}
	})
}
