package kvstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// discardLogger logs nowhere.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// embeddedConn connects to an embedded nats-server of the test's own.
func embeddedConn(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(testenv.NATS(t, nil).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// leasedAssigner is a leased assigner on bucket of an embedded
// nats-server of the test's own, with no loss window and leases of ttl
// (0: the default), logging nowhere.
func leasedAssigner(ctx context.Context, t *testing.T, bucket string, ttl time.Duration) *Assigner {
	t.Helper()
	cfg := workerid.DefaultConfig()
	cfg.Mode = workerid.ModeLeased
	if ttl > 0 {
		cfg.LeaseTTL = ttl
	}
	cfg.StoreLossWindow = -1
	cfg.Logger = discardLogger()
	a, err := NewAssigner(ctx, embeddedConn(t), Config{Config: cfg, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// FuzzKVLeaseDecode: any bytes in a lease key decode to a valid lease or
// errBadLease, never a panic; a decoded lease survives a round trip.
func FuzzKVLeaseDecode(f *testing.F) {
	f.Add([]byte(`{"owner":"0123456789abcdef0123456789abcdef","expires_ms":1796040000000,"reserved":1796040060,"host":"10.0.0.1","port":"1796-42","type":2,"updated_ms":1796039990000}`))
	f.Add([]byte(`{"owner":"","expires_ms":0,"reserved":1796040060,"updated_ms":1796039990000}`))
	f.Add([]byte(`{"owner":"","expires_ms":0,"reserved":1796040060}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"reserved":-1}`))
	f.Add([]byte(`{"expires_ms":"soon"}`))
	f.Add([]byte(`not a lease`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeKVLease(b)
		if err != nil {
			if !errors.Is(err, errBadLease) {
				t.Fatalf("error %v does not wrap errBadLease", err)
			}
			return
		}
		if l.Reserved < 0 || l.ExpiresMs < 0 || l.UpdatedMs <= 0 || len(l.Owner) > 64 {
			t.Fatalf("accepted an invalid lease %+v", l)
		}
		again, err := decodeKVLease(l.encode())
		if err != nil || again != l {
			t.Fatalf("round trip: %+v -> %+v, %v", l, again, err)
		}
	})
}

// TestKVRenewalTrustsOnlyTheLeaderWithALoss: reads of a KV bucket may be
// answered by any copy, and a copy that lags says a lease is gone. Here
// the lagging copy is a mirror answering the bucket's direct gets
// (MirrorDirect) that holds none of the lease keys: about every other
// read lands on it. Renewals must still all succeed, since only the
// stream leader's word makes a lease lost; and a lease really taken
// over must still be reported lost.
func TestKVRenewalTrustsOnlyTheLeaderWithALoss(t *testing.T) {
	nc := embeddedConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "w", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &kvLeaseStore{kv: kv, nc: nc, bucket: "w", log: discardLogger(), watch: newStreamWatch(nc, "w", discardLogger())}
	req := workerid.LeaseRequest{Token: "token-a", MaxWorkerID: 7, TTL: 10 * time.Second}
	g, err := s.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Before the stale copy exists, renewals work (the test can fail on
	// the copy only).
	if err := s.Renew(ctx, g.WorkerID, req.Token, req.TTL, 100, 0); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "W_STALE", MirrorDirect: true,
		Mirror: &jetstream.StreamSource{Name: "KV_w", FilterSubject: "$KV.w.unrelated"},
	}); err != nil {
		t.Fatal(err)
	}
	// The mirror answers direct gets once it has caught up with what it
	// mirrors: give it something to mirror.
	if _, err := kv.Put(ctx, "unrelated", []byte("x")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the mirror to answer direct gets", func() bool {
		_, err := kv.Get(ctx, leaseKey(g.WorkerID))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	stale := 0
	for range 40 {
		if _, err := kv.Get(ctx, leaseKey(g.WorkerID)); errors.Is(err, jetstream.ErrKeyNotFound) {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no read met the stale copy: the test proves nothing")
	}
	for i := range 40 {
		if err := s.Renew(ctx, g.WorkerID, req.Token, req.TTL, int64(101+i), int64(100+i)); err != nil {
			t.Fatalf("renewal %d with a stale copy answering %d of 40 reads: %v", i, stale, err)
		}
	}
	// Taken over for real: lost, whichever copy answers.
	e, err := kv.Get(ctx, leaseKey(g.WorkerID))
	for errors.Is(err, jetstream.ErrKeyNotFound) { // the stale copy again
		e, err = kv.Get(ctx, leaseKey(g.WorkerID))
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := decodeKVLease(e.Value())
	if err != nil || l.Reserved != 140 {
		t.Fatalf("lease after the renewals: %+v, %v; want reserved 140", l, err)
	}
	l.Owner = "token-b"
	if _, err := kv.Update(ctx, leaseKey(g.WorkerID), l.encode(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := s.Renew(ctx, g.WorkerID, req.Token, req.TTL, 200, 140); !errors.Is(err, workerid.ErrLeaseTaken) {
			t.Fatalf("renewal of a lease taken over: %v, want ErrLeaseTaken", err)
		}
	}
	if err := kv.Delete(ctx, leaseKey(g.WorkerID)); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, g.WorkerID, "token-b", req.TTL, 200, 0); !errors.Is(err, workerid.ErrLeaseTaken) {
		t.Fatalf("renewal of a deleted lease: %v, want ErrLeaseTaken", err)
	}
}
