package natsio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
)

// seqInstance is an instance serving the sequences of store (the
// reference store: the protocol is under test here; the real stores are
// in the dispenser's tests).
func seqInstance(t *testing.T, url string, store sequence.SegmentStore, decls ...sequence.Declaration) (*instance, *sequence.Allocator) {
	t.Helper()
	alloc := sequencetest.NewAllocator(t, store, sequencetest.Config())
	if err := alloc.Declare(context.Background(), decls); err != nil {
		t.Fatal(err)
	}
	return startInstance(t, url, 3, instanceOpts{service: ServiceConfig{Sequences: alloc}}), alloc
}

// TestSequenceProtocol: next and batch (binary and decimal) on
// <prefix>.seq.<name>, increasing and dense; undeclared names a 404 at
// once; bad counts a 400; the service answers on after each.
func TestSequenceProtocol(t *testing.T) {
	url := startNATS(t, nil)
	seqInstance(t, url, sequencetest.NewMemStore(), sequence.Declaration{Name: "orders", First: 1})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var got []uint64
	for range 3 {
		n, err := client.SeqNext(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	batch, err := client.SeqBatch(ctx, "orders", 200)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, batch...)
	msg, err := nc.Request(protocol.SeqSubject("uid", "orders", "batch"), []byte("5"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	text, err := protocol.Decimal.Decode(nil, msg.Data)
	if err != nil || len(text) != 5 {
		t.Fatalf("decimal batch %q: %v", msg.Data, err)
	}
	got = append(got, text...)
	for i, n := range got {
		if n != uint64(i+1) {
			t.Fatalf("number %d is %d, want %d (one instance: dense and increasing)", i, n, i+1)
		}
	}

	_, err = client.SeqNext(ctx, "nosuch")
	var se *protocol.ServiceError
	if !errors.As(err, &se) || se.Code != protocol.CodeNotFound || se.Description != `unknown sequence "nosuch"` || !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("undeclared sequence: %v, want 404 unknown sequence \"nosuch\"", err)
	}
	// At once: a 404 is final, so the client does not retry it.
	if r := client.Stats().Retries; r != 0 {
		t.Errorf("the 404 was retried %d times, want it answered at once", r)
	}
	if _, err := client.SeqBatch(ctx, "nosuch", 3); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("batch of an undeclared sequence: %v", err)
	}
	// A sequence hands out numbers, and its errors say so.
	for body, want := range map[string]string{"0": "count is 0: ask for 1 to ", "-3": "is negative", "": "a decimal count of numbers", "x": "not a decimal number", "100001": "too large"} {
		msg, err := nc.Request(protocol.SeqSubject("uid", "orders", "batch"), []byte(body), 2*time.Second)
		if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(msg.Header.Get(micro.ErrorHeader), want) ||
			strings.Contains(msg.Header.Get(micro.ErrorHeader), "ID") || body != "x" && !strings.Contains(msg.Header.Get(micro.ErrorHeader), " numbers") {
			t.Errorf("batch %q: %v %v, want a 400 saying %q, not IDs", body, headerOf(msg), err, want)
		}
	}
	if n, err := client.SeqNext(ctx, "orders"); err != nil || n != uint64(len(got)+1) {
		t.Fatalf("after the bad requests: %d, %v; want %d", n, err, len(got)+1)
	}
}

// TestSequenceUndeclaredHereServed: a name declared in the store by
// another instance is served by one that was not configured with it.
func TestSequenceUndeclaredHereServed(t *testing.T) {
	url := startNATS(t, nil)
	store := sequencetest.NewMemStore()
	seqInstance(t, url, store)
	if _, err := store.Declare(context.Background(), "invoices", 1000); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	sequencesShown := func() string { return serviceInfo(t, nc.Conn).Metadata["sequences"] }
	if shown := sequencesShown(); shown != "" {
		t.Fatalf("micro info lists sequences %q before any was declared", shown)
	}
	n, err := client.SeqNext(context.Background(), "invoices")
	if err != nil || n != 1000 {
		t.Fatalf("SeqNext(invoices) = %d, %v; want 1000", n, err)
	}
	// `nats micro info` learns the name it served, and the service answers
	// on across the readvertisement, in order and without a number twice.
	got := []uint64{n}
	testenv.WaitFor(t, 5*time.Second, "micro info listing invoices", func() bool {
		n, err := client.SeqNext(context.Background(), "invoices")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		return sequencesShown() == "invoices"
	})
	sequencetest.CheckIncreasing(t, "one instance", got)
}

// TestSequenceStoreDown503: with the numbers held used up and the store
// failing, a request gets a 503 naming the sequence and the store, never
// a number.
func TestSequenceStoreDown503(t *testing.T) {
	url := startNATS(t, nil)
	store := &failingStore{MemStore: sequencetest.NewMemStore()}
	seqInstance(t, url, store, sequence.Declaration{Name: "orders", First: 1})
	nc := connect(t, url)
	subject := protocol.SeqSubject("uid", "orders", "next")
	if msg, err := nc.Request(subject, nil, 2*time.Second); err != nil || string(msg.Data) != "1" {
		t.Fatalf("first number: %v %q", err, msg.Data)
	}
	store.fail.Store(true)
	var last *nats.Msg
	testenv.WaitFor(t, 10*time.Second, "a 503 once the held numbers are used up", func() bool {
		msg, err := nc.Request(subject, nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = msg
		return msg.Header.Get(micro.ErrorCodeHeader) != ""
	})
	desc := last.Header.Get(micro.ErrorHeader)
	if last.Header.Get(micro.ErrorCodeHeader) != "503" || len(last.Data) != 0 || !strings.Contains(desc, `sequence "orders"`) || !strings.Contains(desc, "memory store") {
		t.Fatalf("reply %q %v, want a 503 naming the sequence and the store", last.Data, last.Header)
	}
	t.Log(desc)
}

// failingStore is the reference store with its Take cut on demand.
type failingStore struct {
	*sequencetest.MemStore
	fail atomic.Bool
}

func (f *failingStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	if f.fail.Load() {
		return sequence.Segment{}, errors.New("connection refused")
	}
	return f.MemStore.Take(ctx, name, step, floor)
}

// TestSequenceStats: the stats of the sequence endpoints carry each
// sequence's counters.
func TestSequenceStats(t *testing.T) {
	url := startNATS(t, nil)
	seqInstance(t, url, sequencetest.NewMemStore(), sequence.Declaration{Name: "orders", First: 1})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	if _, err := client.SeqBatch(context.Background(), "orders", 7); err != nil {
		t.Fatal(err)
	}
	var seq []sequence.Stats
	testenv.WaitFor(t, 5*time.Second, "the stats show the sequence", func() bool {
		stats := serviceStats(t, nc.Conn)
		// The batch endpoint counts the request; the sequences' state is
		// shown once, under seq_next.
		counted := false
		seq = nil
		for _, e := range stats.Endpoints {
			var d EndpointData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			switch e.Name {
			case protocol.EndpointSeqBatch:
				counted = d.IDs == 7 && e.Subject == "uid.seq.*.batch"
				if d.Sequences != nil {
					t.Errorf("seq_batch stats repeat the sequences: %s", e.Data)
				}
			case protocol.EndpointSeqNext:
				seq = d.Sequences
			}
		}
		return counted
	})
	if len(seq) != 1 || seq[0].Name != "orders" || seq[0].Issued != 7 || seq[0].Segments == 0 || seq[0].Left == 0 || seq[0].Step == 0 {
		t.Fatalf("sequence stats %+v", seq)
	}
	info := serviceInfo(t, nc.Conn)
	subjects := map[string]string{}
	for _, e := range info.Endpoints {
		subjects[e.Name] = e.Subject + " " + e.QueueGroup
	}
	if info.Metadata["sequences"] != "orders" || subjects[protocol.EndpointSeqNext] != "uid.seq.*.next uid-dispenser" || subjects[protocol.EndpointSeqBatch] != "uid.seq.*.batch uid-dispenser" {
		t.Fatalf("INFO metadata %v, endpoints %v", info.Metadata, subjects)
	}
	t.Logf("stats %+v", seq)
}

// TestSequenceInstanceHeader: every sequence reply names the instance
// that answered (Uid-Instance, its micro ID), so a client can check that
// the numbers of one instance increase: two instances on one store, each
// seen, each increasing, no number twice. b's first request waits for
// its first segment off the endpoint's goroutine: a deferred reply
// carries the header too. Error replies carry it; the ID endpoints do not.
func TestSequenceInstanceHeader(t *testing.T) {
	url := startNATS(t, nil)
	store := sequencetest.NewMemStore()
	a, _ := seqInstance(t, url, store, sequence.Declaration{Name: "orders", First: 1})
	b, _ := seqInstance(t, url, store)
	ids := map[string]bool{a.svc.ID(): true, b.svc.ID(): true}
	if len(ids) != 2 {
		t.Fatalf("instance IDs %v: want two different", ids)
	}
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	last := map[string]uint64{}
	seen := map[uint64]bool{}
	for i := range 200 {
		var nums []uint64
		var inst string
		var err error
		if i%2 == 0 {
			var n uint64
			n, inst, err = client.SeqNextFrom(ctx, "orders")
			nums = []uint64{n}
		} else {
			nums, inst, err = client.SeqBatchFrom(ctx, "orders", 7)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ids[inst] {
			t.Fatalf("reply %d names instance %q, want one of %v", i, inst, ids)
		}
		for _, n := range nums {
			if n <= last[inst] || seen[n] {
				t.Fatalf("instance %s: %d after %d (seen before: %v)", inst, n, last[inst], seen[n])
			}
			last[inst] = n
			seen[n] = true
		}
	}
	if len(last) != 2 {
		t.Errorf("only instances %v answered 200 requests, want both", last)
	}

	msg, err := nc.Request(protocol.SeqSubject("uid", "nosuch", "next"), nil, 2*time.Second)
	if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "404" || !ids[msg.Header.Get(protocol.InstanceHeader)] {
		t.Errorf("404 reply %v (%v): want the instance header beside the error", headerOf(msg), err)
	}
	msg, err = nc.Request("uid.next", nil, 2*time.Second)
	if err != nil || msg.Header.Get(protocol.InstanceHeader) != "" {
		t.Errorf("uid.next reply %v (%v): want no instance header", headerOf(msg), err)
	}
}

// TestSequenceWaitHoldsNoOtherName: a request waiting for a name's
// segment from the store does not hold up a name with numbers at hand
// (one endpoint serves every name, and micro runs its handlers one at a
// time), and is answered with its number once the segment comes.
func TestSequenceWaitHoldsNoOtherName(t *testing.T) {
	url := startNATS(t, nil)
	store := &gatedStore{MemStore: sequencetest.NewMemStore(), gated: "slow", gate: make(chan struct{})}
	alloc := sequencetest.NewAllocator(t, store, sequencetest.Config())
	if err := alloc.Declare(context.Background(), []sequence.Declaration{{Name: "fast", First: 1}, {Name: "slow", First: 100}}); err != nil {
		t.Fatal(err)
	}
	// Long enough that the slow request outlasts the fast ones on a busy machine.
	startInstance(t, url, 3, instanceOpts{service: ServiceConfig{Sequences: alloc, CapacityWait: 10 * time.Second}})
	nc := connect(t, url)
	fast := protocol.SeqSubject("uid", "fast", "next")
	if msg, err := nc.Request(fast, nil, 2*time.Second); err != nil || string(msg.Data) != "1" {
		t.Fatalf("first number of fast: %v %q", err, msg.Data)
	}

	slowReply := make(chan *nats.Msg, 1)
	slowErr := make(chan error, 1)
	go func() {
		msg, err := nc.Request(protocol.SeqSubject("uid", "slow", "next"), nil, 15*time.Second)
		slowErr <- err
		slowReply <- msg
	}()
	testenv.WaitFor(t, 5*time.Second, "the slow name's request waiting in the store", func() bool { return store.waiting.Load() > 0 })

	got := map[string]bool{"1": true}
	// The slow name's segment comes only once the gate opens, after these:
	// a fast request held up behind it would never be answered (the
	// timeout is a safety net, not a bound on speed).
	for i := range 20 {
		msg, err := nc.Request(fast, nil, 30*time.Second)
		if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("fast request %d while slow waits for the store: %v %v (held up?)", i, err, headerOf(msg))
		}
		if got[string(msg.Data)] {
			t.Fatalf("fast number %s twice", msg.Data)
		}
		got[string(msg.Data)] = true
	}
	select {
	case err := <-slowErr:
		t.Fatalf("the slow request returned before its segment came: %v", err)
	default:
	}
	close(store.gate)
	if err := <-slowErr; err != nil {
		t.Fatal(err)
	}
	if msg := <-slowReply; string(msg.Data) != "100" {
		t.Fatalf("slow reply %q %v, want 100 once the segment came", msg.Data, msg.Header)
	}
}

// gatedStore is the reference store whose takes for one name wait until
// the gate closes (a slow or stuck store for that name only).
type gatedStore struct {
	*sequencetest.MemStore
	gated   string
	gate    chan struct{}
	waiting atomic.Int32
}

func (g *gatedStore) Take(ctx context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	if name == g.gated {
		g.waiting.Add(1)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return sequence.Segment{}, ctx.Err()
		}
	}
	return g.MemStore.Take(ctx, name, step, floor)
}

// TestSequenceHomes: in a fleet of regions an instance subscribes next
// and batch only of the sequences homed in its region, one endpoint per
// name (named seq_next and seq_batch, each with its own counters and its
// own name's stats); every sequence's home is in the metadata and on
// <prefix>.seq.<name>.home. A request for a sequence homed elsewhere meets
// no responders here, and the client turns it into HomeUnreachableError
// naming the home once that has lasted HomeWait, while a home that
// answers again within HomeWait (a gateway link reconnecting) serves the
// call; a name of no region stays a 404.
func TestSequenceHomes(t *testing.T) {
	url := startNATS(t, nil)
	store := sequencetest.NewMemStore()
	alloc := sequencetest.NewAllocator(t, store, sequencetest.Config())
	if err := alloc.Declare(context.Background(), []sequence.Declaration{{Name: "orders", First: 1}, {Name: "refunds", First: 1}}); err != nil {
		t.Fatal(err)
	}
	startInstance(t, url, 3, instanceOpts{service: ServiceConfig{Sequences: alloc, Region: "east", Regions: "east=0-511,west=512-1023",
		SequenceHomes: map[string]string{"orders": "east", "refunds": "east", "invoices": "west"}}})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{HomeWait: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if nums, err := client.SeqBatch(ctx, "orders", 3); err != nil || !slices.Equal(nums, []uint64{1, 2, 3}) {
		t.Fatalf("orders, homed here: %v, %v", nums, err)
	}
	_, err := client.SeqNext(ctx, "invoices")
	var he *uidclient.HomeUnreachableError
	if !errors.As(err, &he) || he.Home != "west" || he.Sequence != "invoices" || !errors.Is(err, nats.ErrNoResponders) || ctx.Err() != nil {
		t.Fatalf("invoices, homed in west: %v, want a HomeUnreachableError naming west before the deadline", err)
	}
	if retried := client.Stats().NoResponders; retried < 2 {
		t.Fatalf("invoices failed after %d attempts with no responders, want it asked again within HomeWait", retried)
	}

	// West's instance (a stand-in responder) comes back while a call
	// waits out its HomeWait: the call is served.
	patient := uidclient.New(nc.Conn, uidclient.Config{HomeWait: time.Minute})
	served := make(chan error, 1)
	go func() {
		n, err := patient.SeqNext(ctx, "invoices")
		if err == nil && n != 7 {
			err = fmt.Errorf("number %d, want 7 from the stand-in", n)
		}
		served <- err
	}()
	testenv.WaitFor(t, 5*time.Second, "the call meets no responders", func() bool { return patient.Stats().NoResponders > 0 })
	west, err := nc.Conn.Subscribe("uid.seq.invoices.next", func(m *nats.Msg) { _ = m.Respond([]byte("7")) })
	if err != nil {
		t.Fatal(err)
	}
	defer west.Unsubscribe()
	if err := <-served; err != nil {
		t.Fatalf("invoices with its home back within HomeWait: %v", err)
	}
	if err := west.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SeqNext(ctx, "nosuch"); !errors.Is(err, uidclient.ErrNotFound) || !strings.Contains(err.Error(), `unknown sequence "nosuch"`) {
		t.Fatalf("a sequence of no region: %v, want the 404", err)
	}
	if reply, err := nc.Request("uid.seq.invoices.home", nil, 2*time.Second); err != nil || string(reply.Data) != "west" {
		t.Fatalf("uid.seq.invoices.home: %v", err)
	}
	info := serviceInfo(t, nc.Conn)
	var subjects []string
	for _, e := range info.Endpoints {
		if strings.HasPrefix(e.Name, "seq_") {
			subjects = append(subjects, e.Name+" "+e.Subject)
		}
	}
	slices.Sort(subjects)
	want := []string{"seq_batch uid.seq.orders.batch", "seq_batch uid.seq.refunds.batch", "seq_home uid.seq.*.home", "seq_next uid.seq.orders.next", "seq_next uid.seq.refunds.next"}
	if !slices.Equal(subjects, want) || info.Metadata["sequences"] != "orders,refunds" || info.Metadata["sequence_homes"] != "invoices@west,orders@east,refunds@east" {
		t.Fatalf("endpoints %v (want %v), metadata %v", subjects, want, info.Metadata)
	}
	for _, e := range serviceStats(t, nc.Conn).Endpoints {
		var d EndpointData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		switch e.Subject {
		case "uid.seq.orders.batch":
			if d.IDs != 3 {
				t.Errorf("orders' batch endpoint counts %d numbers, want 3", d.IDs)
			}
		case "uid.seq.refunds.batch":
			if d.IDs != 0 {
				t.Errorf("refunds' batch endpoint counts %d numbers, want 0", d.IDs)
			}
		case "uid.seq.orders.next", "uid.seq.refunds.next":
			if len(d.Sequences) != 1 || "uid.seq."+d.Sequences[0].Name+".next" != e.Subject {
				t.Errorf("%s's stats show the sequences %+v, want its own", e.Subject, d.Sequences)
			}
		}
	}
}

// SetSequencesServing(false) takes the sequences' next and batch out of
// the queue group; the ID endpoints and parse stay. The group's other
// member answers every sequence request meanwhile, and with both out the
// callers get no responders; SetSequencesServing(true) brings them back.
// The numbers of both instances (one store) are distinct throughout.
func TestSetSequencesServingLeavesAndRejoinsTheQueueGroup(t *testing.T) {
	url := startNATS(t, nil)
	store := sequencetest.NewMemStore()
	instance := func(worker uint64) *instance {
		alloc := sequencetest.NewAllocator(t, store, sequencetest.Config())
		if err := alloc.Declare(context.Background(), []sequence.Declaration{{Name: "orders", First: 1}}); err != nil {
			t.Fatal(err)
		}
		return startInstance(t, url, worker, instanceOpts{service: ServiceConfig{Sequences: alloc}})
	}
	a, b := instance(1), instance(2)
	nc := connect(t, url).Conn
	subject := protocol.SeqSubject("uid", "orders", protocol.EndpointNext)
	var nums []uint64
	next := func() (uint64, string) {
		t.Helper()
		msg, err := nc.Request(subject, nil, 5*time.Second)
		if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("%s: %v %v", subject, err, headerOf(msg))
		}
		n, err := protocol.Decimal.Decode(nil, msg.Data)
		if err != nil || len(n) != 1 {
			t.Fatalf("%s replied %q: %v", subject, msg.Data, err)
		}
		nums = append(nums, n[0])
		return n[0], msg.Header.Get(protocol.InstanceHeader)
	}
	if err := a.svc.SetSequencesServing(false); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, from := next(); from != b.svc.ID() {
			t.Fatalf("a number from %s with a out of the group, want b (%s)", from, b.svc.ID())
		}
	}
	info := microReply[micro.Info](t, nc, "$SRV.INFO.uid-dispenser."+a.svc.ID())
	var names []string
	for _, e := range info.Endpoints {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if info.Metadata["serving_sequences"] != "false" || !slices.Equal(names, []string{protocol.EndpointBatch, protocol.EndpointNext, protocol.EndpointParse}) {
		t.Fatalf("a's INFO while not serving sequences: metadata %v, endpoints %v", info.Metadata, names)
	}
	if id := requestID(t, nc, 5*time.Second); id == 0 {
		t.Fatal("no ID while a serves no sequences")
	}

	// Both out: no responders for sequences, IDs still served.
	if err := b.svc.SetSequencesServing(false); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(subject, nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("%s with both out: %v, want no responders", subject, err)
	}
	if id := requestID(t, nc, 5*time.Second); id == 0 {
		t.Fatal("no ID while neither serves sequences")
	}

	if err := a.svc.SetSequencesServing(true); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, from := next(); from != a.svc.ID() {
			t.Fatalf("a number from %s with only a serving, want a (%s)", from, a.svc.ID())
		}
	}
	if info := microReply[micro.Info](t, nc, "$SRV.INFO.uid-dispenser."+a.svc.ID()); info.Metadata["serving_sequences"] != "" {
		t.Fatalf("a's metadata back in the group: %v", info.Metadata)
	}
	sequencetest.CheckUnique(t, nums)
}
