package soak

import "testing"

// A dispenser holds a worker ID, as far as the soak can tell from its log,
// from the lease until it releases it, loses it, or gives its lane back:
// a lane given back while its release cannot reach the store (a
// partition) no longer issues, and a later owner of it is no takeover
// (the 60-minute run reported 14 such false zombies).
func TestHoldsFollowsTheLog(t *testing.T) {
	p := &dispenserProc{slot: &dispenserSlot{events: newEvents(), fleet: kvFleet}, holds: map[int64]bool{}}
	for _, line := range []string{
		`{"msg":"workerid: leased worker ID","worker_id":3,"after":0}`,
		`{"msg":"workerid: leased worker ID","worker_id":4,"after":0}`,
		`{"msg":"workerid: leased worker ID","worker_id":5,"after":0}`,
		`{"msg":"gave back an idle lane","worker_id":3,"lanes":2}`,
		`{"msg":"workerid: released worker ID","worker_id":4}`,
	} {
		p.handleLine([]byte(line))
	}
	for w, want := range map[int64]bool{3: false, 4: false, 5: true} {
		if got := p.Holds(w); got != want {
			t.Errorf("Holds(%d) = %v, want %v", w, got, want)
		}
	}
}
