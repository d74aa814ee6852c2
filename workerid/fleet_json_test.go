package workerid_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// A sealed record is stored with "sealed" and, for instances of earlier
// versions, its StartsAfter below zero; records written before the
// Sealed field (a seal only below zero) read as sealed with the
// StartsAfter they had, and unsealed records read as they are.
func TestFleetJSONReadsTheOldSeal(t *testing.T) {
	f := workerid.Fleet{Generation: 2, Layout: "31/10/22@2026-01-01T00:00:00Z", WorkerMode: workerid.ModeLeased, SubjectPrefix: "uid", StartsAfter: 1_800_000_000, Sealed: true}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"starts_after":-1800000001`) || !strings.Contains(s, `"sealed":true`) {
		t.Fatalf("a sealed record is stored as %s", s)
	}
	for _, tc := range []struct {
		stored string
		want   workerid.Fleet
	}{
		{string(data), f},
		{`{"generation":2,"layout":"31/10/22@2026-01-01T00:00:00Z","worker_mode":"leased","subject_prefix":"uid","starts_after":-1800000001}`, f},
		{`{"generation":2,"layout":"31/10/22@2026-01-01T00:00:00Z","worker_mode":"leased","subject_prefix":"uid","starts_after":-1}`,
			workerid.Fleet{Generation: 2, Layout: f.Layout, WorkerMode: f.WorkerMode, SubjectPrefix: "uid", Sealed: true}},
		{`{"generation":2,"layout":"31/10/22@2026-01-01T00:00:00Z","worker_mode":"leased","subject_prefix":"uid","starts_after":1800000000}`,
			workerid.Fleet{Generation: 2, Layout: f.Layout, WorkerMode: f.WorkerMode, SubjectPrefix: "uid", StartsAfter: 1_800_000_000}},
	} {
		var got workerid.Fleet
		if err := json.Unmarshal([]byte(tc.stored), &got); err != nil || got != tc.want {
			t.Errorf("%s reads as %+v, %v; want %+v", tc.stored, got, err, tc.want)
		}
	}
}
