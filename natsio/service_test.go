package natsio

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func TestRawNextWithEmptyBody(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 7, instanceOpts{})
	nc := connect(t, url)
	id := requestID(t, nc.Conn, 2*time.Second)
	parts := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id)
	if parts.WorkerID != 7 {
		t.Fatalf("ID %d has worker %d, want 7", id, parts.WorkerID)
	}
	if d := time.Since(parts.Time); d < -time.Minute || d > time.Minute {
		t.Fatalf("ID time %v is far from now", parts.Time)
	}
	// Any body is fine for next.
	msg, err := nc.Request("uid.next", []byte("whatever\x00"), 2*time.Second)
	if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("next with a body: %v %v", err, headerOf(msg))
	}
}

func TestBatchEncodingsAndParse(t *testing.T) {
	url := startNATS(t, nil)
	startInstance(t, url, 3, instanceOpts{})
	nc := connect(t, url)

	msg, err := nc.Request("uid.batch", []byte("5"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	text, err := protocol.Decimal.Decode(nil, msg.Data)
	if err != nil || len(text) != 5 || strings.Count(string(msg.Data), "\n") != 4 {
		t.Fatalf("decimal batch %q: %v, %v", msg.Data, text, err)
	}
	bin := &nats.Msg{Subject: "uid.batch", Data: []byte("1000"), Header: nats.Header{}}
	bin.Header.Set(protocol.EncodingHeader, protocol.EncodingBinary)
	msg, err = nc.RequestMsg(bin, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := protocol.Binary.Decode(nil, msg.Data)
	if err != nil || len(ids) != 1000 {
		t.Fatalf("binary batch: %d IDs, %v", len(ids), err)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("batch not increasing at %d: %d after %d", i, ids[i], ids[i-1])
		}
	}
	if ids[0] <= text[4] {
		t.Fatalf("second batch %d not after first %d", ids[0], text[4])
	}
	// Ranges: the next 1,000 as runs of consecutive IDs.
	rng := &nats.Msg{Subject: "uid.batch", Data: []byte("1000"), Header: nats.Header{"uid-encoding": []string{"Ranges"}}}
	if msg, err = nc.RequestMsg(rng, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	runs, err := protocol.DecodeRuns(nil, msg.Data)
	if err != nil || protocol.CountOf(runs) != 1000 || len(runs) > 2 || runs[0].First <= ids[999] {
		t.Fatalf("ranges batch after %d: %v, %v", ids[999], runs, err)
	}
	// A lower-case header name, as other clients may send it.
	lower := &nats.Msg{Subject: "uid.batch", Data: []byte("2"), Header: nats.Header{"uid-encoding": []string{"BINARY"}}}
	if msg, err = nc.RequestMsg(lower, 2*time.Second); err != nil || len(msg.Data) != 16 {
		t.Fatalf("lower-case header: %q, %v", msg.Data, err)
	}

	msg, err = nc.Request("uid.parse", []byte(strconv.FormatUint(ids[0], 10)), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, ids[0])
	wantJSON, _ := want.MarshalJSON()
	if string(msg.Data) != string(wantJSON) {
		t.Fatalf("parse reply %s, want %s", msg.Data, wantJSON)
	}
	var j map[string]string
	if err := json.Unmarshal(msg.Data, &j); err != nil || j["workerId"] != "3" {
		t.Fatalf("parse JSON %s: %v", msg.Data, err)
	}
}

func TestMonitoringEndpoints(t *testing.T) {
	url := startNATS(t, nil)
	inst := startInstance(t, url, 11, instanceOpts{})
	nc := connect(t, url)
	if _, err := nc.Request("uid.next", nil, 2*time.Second); err != nil {
		t.Fatal(err)
	}

	msg, err := nc.Request("$SRV.PING.uid-dispenser", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Name != protocol.ServiceName || ping.Version != protocol.ServiceVersion {
		t.Fatalf("PING %s: %v", msg.Data, err)
	}
	if ping.Metadata["worker_id"] != "11" || ping.Metadata["layout"] != "31/10/22" || ping.Metadata["epoch"] != "2026-01-01T00:00:00Z" ||
		ping.Metadata["ids_per_second_per_lane"] != "4194304" || ping.Metadata["max_lanes"] != "1" {
		t.Fatalf("PING metadata %v", ping.Metadata)
	}

	info := serviceInfo(t, nc.Conn)
	subjects := map[string]string{}
	for _, e := range info.Endpoints {
		subjects[e.Subject] = e.QueueGroup
		if e.Name == protocol.EndpointBatch && e.Metadata["max_batch_binary"] != "100000" {
			t.Errorf("batch metadata %v", e.Metadata)
		}
	}
	for _, s := range []string{"uid.next", "uid.batch", "uid.parse"} {
		if subjects[s] != protocol.DefaultQueueGroup {
			t.Errorf("INFO endpoints %v: %s missing or not in queue group %s", subjects, s, protocol.DefaultQueueGroup)
		}
	}
	if info.ID != inst.svc.ID() || info.Metadata["worker_id"] != "11" {
		t.Errorf("INFO %+v", info)
	}

	// The counters are updated after the reply is sent: ask until they
	// have caught up.
	var stats micro.Stats
	testenv.WaitFor(t, 5*time.Second, "the stats count the request", func() bool {
		msg, err = nc.Request("$SRV.STATS.uid-dispenser", nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			t.Fatal(err)
		}
		return counted(stats, protocol.EndpointNext)
	})
	found := false
	for _, e := range stats.Endpoints {
		var d EndpointData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("stats data %s: %v", e.Data, err)
		}
		if e.Name != protocol.EndpointNext {
			// The ring is the service's, shown once (under next), not
			// repeated under every endpoint.
			if strings.Contains(string(e.Data), `"ring"`) || strings.Contains(string(e.Data), `"async_errors"`) {
				t.Errorf("%s stats repeat the service's state: %s", e.Name, e.Data)
			}
			continue
		}
		found = true
		if d.Ring.WorkerID != 11 || d.Ring.Size != 1<<20 || len(d.Ring.WorkerIDs) != 1 || d.Ring.PerSecond != 4<<20 || d.Ring.Available == 0 || d.Ring.PaddingRounds == 0 || d.Ring.Claim != "ok" {
			t.Errorf("ring stats %+v", d.Ring)
		}
		if d.AsyncErrors == nil || *d.AsyncErrors != 0 {
			t.Errorf("next stats async_errors %v, want 0", d.AsyncErrors)
		}
		if d.OK != 1 || d.IDs != 1 || e.NumRequests != 1 {
			t.Errorf("next stats %+v / %+v", e, d)
		}
	}
	if !found {
		t.Fatalf("no next endpoint in stats %s", msg.Data)
	}
}

// counted reports whether the stats count one request of endpoint.
func counted(stats micro.Stats, endpoint string) bool {
	for _, e := range stats.Endpoints {
		var d EndpointData
		if e.Name == endpoint && json.Unmarshal(e.Data, &d) == nil {
			return e.NumRequests == 1 && d.OK == 1
		}
	}
	return false
}

// errorReply sends a request and returns the error code and description.
func errorReply(t *testing.T, nc *natsconn.Conn, msg *nats.Msg) (string, string) {
	t.Helper()
	reply, err := nc.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatalf("%s %.20q: %v", msg.Subject, msg.Data, err)
	}
	return reply.Header.Get(micro.ErrorCodeHeader), reply.Header.Get(micro.ErrorHeader)
}

func TestBadInputGets400AndServiceKeepsServing(t *testing.T) {
	url := startNATS(t, &server.Options{MaxPayload: 8 << 20})
	startInstance(t, url, 1, instanceOpts{})
	nc := connect(t, url)
	megabytes := make([]byte, 3<<20)
	for i := range megabytes {
		megabytes[i] = byte('0' + i%10)
	}
	binary := nats.Header{protocol.EncodingHeader: []string{protocol.EncodingBinary}}
	for _, tc := range []struct {
		subject string
		body    []byte
		header  nats.Header
		want    string
	}{
		{"uid.batch", []byte("ten"), nil, `count "ten" is not a decimal number`},
		{"uid.batch", []byte("0"), nil, "count is 0"},
		{"uid.batch", []byte("-3"), nil, "count -3 is negative"},
		{"uid.batch", []byte("100001"), binary, "count 100001 is too large: at most 100000"},
		{"uid.batch", nil, nil, "count missing"},
		{"uid.batch", megabytes, nil, "body of 3145728 bytes is too long"},
		{"uid.parse", []byte("\x00\xffjunk\x7f"), nil, `ID "\x00\xffjunk\x7f" is not a decimal number`},
		{"uid.parse", []byte("-12"), nil, "ID -12 is negative"},
		{"uid.parse", []byte("99999999999999999999"), nil, "does not fit in 64 bits"},
		{"uid.parse", []byte("9223372036854775808"), nil, "sign bit"},
		{"uid.parse", megabytes, nil, "too long"},
	} {
		code, desc := errorReply(t, nc, &nats.Msg{Subject: tc.subject, Data: tc.body, Header: tc.header})
		if code != "400" || !strings.Contains(desc, tc.want) {
			t.Errorf("%s %.20q: got %s %q, want 400 containing %q", tc.subject, tc.body, code, desc, tc.want)
		}
		reply, err := nc.Request("uid.next", nil, 2*time.Second)
		if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("after bad input the instance does not serve: %v", err)
		}
	}
}

func TestMaxBatchCappedByMaxPayload(t *testing.T) {
	url := startNATS(t, &server.Options{MaxPayload: 4000})
	startInstance(t, url, 1, instanceOpts{})
	nc := connect(t, url)
	binary := nats.Header{protocol.EncodingHeader: []string{protocol.EncodingBinary}}
	if code, desc := errorReply(t, nc, &nats.Msg{Subject: "uid.batch", Data: []byte("501"), Header: binary}); code != "400" || !strings.Contains(desc, "at most 500") {
		t.Fatalf("binary over the cap: %s %q", code, desc)
	}
	if code, desc := errorReply(t, nc, &nats.Msg{Subject: "uid.batch", Data: []byte("201")}); code != "400" || !strings.Contains(desc, "at most 200 IDs per batch request as text") ||
		!strings.Contains(desc, "up to 500 with the header Uid-Encoding: binary") {
		t.Fatalf("decimal over the cap, within the binary one: %s %q; want both limits", code, desc)
	}
	if code, desc := errorReply(t, nc, &nats.Msg{Subject: "uid.batch", Data: []byte("501")}); code != "400" || strings.Contains(desc, "binary") {
		t.Fatalf("decimal over both caps: %s %q; want no binary hint", code, desc)
	}
	reply, err := nc.RequestMsg(&nats.Msg{Subject: "uid.batch", Data: []byte("500"), Header: binary}, 2*time.Second)
	if err != nil || len(reply.Data) != 4000 {
		t.Fatalf("binary at the cap: %d bytes, %v", len(reply.Data), err)
	}
	reply, err = nc.Request("uid.batch", []byte("200"), 2*time.Second)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" || strings.Count(string(reply.Data), "\n") != 199 {
		t.Fatalf("decimal at the cap: %v %v", err, headerOf(reply))
	}
	// Ranges are bounded by the count, not the payload: 20,000 IDs, forty
	// times binary's cap, come in a few runs.
	ranges := nats.Header{protocol.EncodingHeader: []string{protocol.EncodingRanges}}
	reply, err = nc.RequestMsg(&nats.Msg{Subject: "uid.batch", Data: []byte("20000"), Header: ranges}, 5*time.Second)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("ranges beyond the binary cap: %v %v", err, headerOf(reply))
	}
	runs, err := protocol.DecodeRuns(nil, reply.Data)
	if err != nil || protocol.CountOf(runs) != 20000 || len(runs) > 4 {
		t.Fatalf("ranges: %d runs of %d IDs in all, %v", len(runs), protocol.CountOf(runs), err)
	}
	i := slices.IndexFunc(serviceInfo(t, nc.Conn).Endpoints, func(e micro.EndpointInfo) bool {
		return e.Name == protocol.EndpointBatch && e.Metadata["max_batch_ranges"] == "4194304" && e.Metadata["max_batch_binary"] == "500"
	})
	if i < 0 {
		t.Fatalf("no batch endpoint with max_batch_ranges one lane-second (4194304): %v", serviceInfo(t, nc.Conn).Endpoints)
	}
}

func TestUnavailableSays503AndWhy(t *testing.T) {
	url := startNATS(t, nil)
	// 10 sequence bits and no boost: a ring of 1,024 IDs, at most 1 s
	// ahead of the clock, and no waiting.
	layout := uidcore.Layout{TimeBits: 43, WorkerBits: 10, SeqBits: 10, Epoch: uidcore.DefaultEpoch}
	inst := startInstance(t, url, 2, instanceOpts{cached: uidcore.CachedOptions{
		Layout: layout, RingSeconds: 1, MaxAhead: time.Second, TakeWait: time.Nanosecond,
	}})
	nc := connect(t, url)
	var code, desc string
	var retryAfter string
	// Until padding has met its bound once, an empty ring is padding
	// running behind (503 "buffer empty", which a loaded CI machine shows
	// when the padding goroutine is late); after that it is capacity.
	testenv.WaitFor(t, 10*time.Second, "an error other than buffer empty", func() bool {
		msg, err := nc.Request("uid.batch", []byte("1000"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		code, desc = msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
		retryAfter = msg.Header.Get(protocol.RetryAfterHeader)
		return code != "" && !(code == "503" && strings.HasPrefix(desc, "buffer empty"))
	})
	// At its capacity the instance says what it sustains and when to retry.
	if code != "503" || !strings.Contains(desc, "at capacity: this instance sustains 1024 IDs/s") || !strings.Contains(desc, "retry in") {
		t.Fatalf("drained ring: %s %q, want 503 at capacity ... retry in", code, desc)
	}
	if ms, err := strconv.Atoi(retryAfter); err != nil || ms < 1 || ms > 1000 {
		t.Errorf("%s: %q, want milliseconds to the next second", protocol.RetryAfterHeader, retryAfter)
	}

	inst.gen.Close()
	for range 5 { // drain what is left, then the closed generator says so
		code, desc = errorReply(t, nc, &nats.Msg{Subject: "uid.batch", Data: []byte("1000")})
	}
	if code != "503" || !strings.Contains(desc, "shutting down") {
		t.Fatalf("closed generator: %s %q, want 503 shutting down", code, desc)
	}
}

func TestSlowConsumerDoesNotStopTheService(t *testing.T) {
	url := startNATS(t, nil)
	// A tiny pending limit makes NATS drop requests and report a slow
	// consumer under a burst.
	inst := startInstance(t, url, 1, instanceOpts{service: ServiceConfig{PendingMsgs: 2, PendingBytes: 1 << 20}})
	firstID := inst.svc.ID()
	nc := connect(t, url)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i := 0; i < 20000 && inst.svc.AsyncErrors() == 0; i++ {
		if err := nc.PublishRequest("uid.batch", inbox, []byte("100")); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			nc.Flush()
		}
	}
	testenv.WaitFor(t, 5*time.Second, "a slow consumer reported (else the test did not provoke one)", func() bool { return inst.svc.AsyncErrors() > 0 })
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Next(ctx); err != nil {
		t.Fatalf("after a slow consumer the service does not answer: %v", err)
	}
	// The very micro service answers (the pinned micro does not stop a
	// service on an async error): its ID is the one it started with.
	inst.svc.mu.Lock()
	stopped := inst.svc.svc.Stopped()
	inst.svc.mu.Unlock()
	if stopped || inst.svc.ID() != firstID {
		t.Fatalf("after a slow consumer: micro service stopped %v, id %s (was %s)", stopped, inst.svc.ID(), firstID)
	}
}

// switchingSource is an IDSource whose generator the test replaces, as
// the dispenser's source does on a new worker claim.
type switchingSource struct {
	cur atomic.Pointer[uidcore.CachedGenerator]
}

func (s *switchingSource) NextN(ctx context.Context, dst []uint64) (int, error) {
	return s.cur.Load().NextN(ctx, dst)
}
func (s *switchingSource) TryNextN(dst []uint64) (int, error) { return s.cur.Load().TryNextN(dst) }
func (s *switchingSource) Layout() uidcore.Layout             { return s.cur.Load().Layout() }
func (s *switchingSource) WorkerID() uint64                   { return s.cur.Load().WorkerID() }
func (s *switchingSource) State() uidcore.State               { return s.cur.Load().State() }

// When the source moves to another worker ID, Readvertise adds the micro
// service again with the new metadata (a new service ID) while requests
// keep being answered; with nothing changed it does nothing.
func TestReadvertiseFollowsTheSource(t *testing.T) {
	url := startNATS(t, nil)
	newGen := func(worker uint64) *uidcore.CachedGenerator {
		g, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: worker}, TakeWait: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	src := &switchingSource{}
	src.cur.Store(newGen(5))
	conn := connect(t, url)
	svc, err := NewService(conn.Conn, src, ServiceConfig{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	firstID := svc.ID()
	if err := svc.Readvertise(); err != nil || svc.ID() != firstID {
		t.Fatalf("Readvertise with the same worker: %v, service %s (was %s)", err, svc.ID(), firstID)
	}

	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		wg         sync.WaitGroup
		ids        []uint64
		loadErr    error
		fromWorker [7]atomic.Int64 // IDs taken so far, by worker
	)
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			id, err := client.Next(ctx)
			if err != nil {
				loadErr = err
				return
			}
			ids = append(ids, id)
			if p, err := uidcore.DefaultLayout().Parse(id); err == nil && p.WorkerID < uint64(len(fromWorker)) {
				fromWorker[p.WorkerID].Add(1)
			}
		}
	})
	testenv.WaitFor(t, 5*time.Second, "IDs from the first generator", func() bool { return fromWorker[5].Load() >= 10 })
	src.cur.Store(newGen(6))
	if err := svc.Readvertise(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "IDs from the new generator", func() bool { return fromWorker[6].Load() >= 10 })
	close(stop)
	wg.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	shares := workerShares(t, ids)
	if shares[5] == 0 || shares[6] == 0 {
		t.Fatalf("worker shares across the swap: %v", shares)
	}
	testenv.CheckDistinct(t, ids)
	if svc.ID() == firstID {
		t.Fatal("the service was not added again")
	}
	msg, err := nc.Request("$SRV.PING.uid-dispenser", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Metadata["worker_id"] != "6" || ping.ID != svc.ID() {
		t.Fatalf("PING after the swap %s: %v", msg.Data, err)
	}
}

// headerOf is a reply's header for a failure message: nil when the
// request failed and there is no reply (reading msg.Header then would
// panic instead of reporting the error).
func headerOf(msg *nats.Msg) nats.Header {
	if msg == nil {
		return nil
	}
	return msg.Header
}

// SetIssuing(false) takes next and batch out of the queue group, parse
// stays: the group's other member answers every ID request meanwhile, a
// lone one's callers get no responders; SetIssuing(true) brings them back.
func TestSetIssuingLeavesAndRejoinsTheQueueGroup(t *testing.T) {
	url := startNATS(t, nil)
	a := startInstance(t, url, 1, instanceOpts{})
	b := startInstance(t, url, 2, instanceOpts{})
	nc := connect(t, url).Conn
	if err := a.svc.SetIssuing(false); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for range 200 {
		ids = append(ids, requestID(t, nc, 5*time.Second))
	}
	if shares := workerShares(t, ids); shares[1] != 0 || shares[2] != len(ids) {
		t.Fatalf("IDs by worker with a out of the group: %v", shares)
	}
	if info := microReply[micro.Info](t, nc, "$SRV.INFO.uid-dispenser."+a.svc.ID()); info.Metadata["issuing"] != "false" || len(info.Endpoints) != 1 {
		t.Fatalf("a's INFO while not issuing: %+v", info)
	}

	// Both out: no responders for IDs, parse still answered.
	if err := b.svc.SetIssuing(false); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("uid.batch", []byte("5"), 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("batch with both out: %v, want no responders", err)
	}
	msg, err := nc.Request("uid.parse", []byte(strconv.FormatUint(ids[0], 10)), 5*time.Second)
	if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("parse with both out: %v %v", err, headerOf(msg))
	}

	if err := a.svc.SetIssuing(true); err != nil {
		t.Fatal(err)
	}
	msg, err = nc.Request("uid.batch", []byte("5"), 5*time.Second)
	if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("batch with a back: %v %v", err, headerOf(msg))
	}
	more, err := protocol.Decimal.Decode(nil, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if shares := workerShares(t, more); shares[1] != len(more) {
		t.Fatalf("IDs by worker with only a issuing: %v", shares)
	}
	testenv.CheckDistinct(t, append(ids, more...))
}
