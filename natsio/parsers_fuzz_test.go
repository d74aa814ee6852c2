package natsio

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Fuzz targets for every parser of outside input that protocol_test.go,
// blocks_test.go and kv_internal_test.go do not fuzz already: the whole
// request path of the service (body, encoding header, trace context), the
// client's reply decoders and the URL redaction. Their seeds run in plain
// `go test`; fuzz one with e.g.
//
//	go test -run '^$' -fuzz FuzzServiceRequest -fuzztime 60s ./natsio/

// FuzzServiceRequest sends arbitrary requests to a real service (embedded
// nats-server, one instance) and checks that every one is answered: an ID
// reply that matches what the parsers accept, or a 400 whose description
// is the parser's, never a 500 and never silence. The IDs handed out over
// all inputs are checked for duplicates.
func FuzzServiceRequest(f *testing.F) {
	for _, s := range []struct {
		endpoint            uint8
		body                string
		encoding, traceCtxt string
	}{
		{0, "", "", ""},
		{0, "\x00\xff anything", "binary", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{1, "3", "", ""},
		{1, " 17\n", "binary", ""},
		{1, "5", "BINARY", "00-00000000000000000000000000000000-0000000000000000-00"},
		{1, "0", "", ""},
		{1, "-2", "text", ""},
		{1, "1001", "binary", ""},
		{1, "99999999999999999999", "", "garbage"},
		{1, "1e3", "", ""},
		{1, strings.Repeat(" ", 70), "", ""},
		{2, "123757721697648640", "", ""},
		{2, "9223372036854775808", "", ""},
		{2, "x", "", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{2, "", "", ""},
		{3, "1", "", ""}, // endpoint 3 wraps to next
	} {
		f.Add(s.endpoint, []byte(s.body), s.encoding, s.traceCtxt)
	}

	// A real tracer and the W3C propagator, so that the trace context
	// header is parsed as in production.
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	tp := sdktrace.NewTracerProvider()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	f.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(f.Context())
	})

	const maxBatch = 1000
	url := startNATS(f, nil)
	inst := startInstance(f, url, 7, instanceOpts{
		cached:  uidcore.CachedOptions{MaxAhead: uidcore.NoAheadBound, TakeWait: time.Second},
		service: ServiceConfig{MaxBatch: maxBatch},
	})
	nc := connect(f, url)
	layout := inst.gen.Layout()
	endpoints := []string{protocol.EndpointNext, protocol.EndpointBatch, protocol.EndpointParse}
	var (
		mu   sync.Mutex
		seen = map[uint64]struct{}{}
	)
	record := func(t *testing.T, ids []uint64) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if _, dup := seen[id]; dup {
				t.Fatalf("ID %d handed out twice", id)
			}
			if len(seen) < 1<<20 {
				seen[id] = struct{}{}
			}
		}
	}

	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte, encoding, traceparent string) {
		if !headerValueOK(encoding) || !headerValueOK(traceparent) {
			t.Skip("not a header value NATS can carry")
		}
		ep := endpoints[int(endpoint)%len(endpoints)]
		msg := &nats.Msg{Subject: protocol.Subject(protocol.DefaultSubjectPrefix, ep), Data: body, Header: nats.Header{}}
		if encoding != "" {
			msg.Header.Set(protocol.EncodingHeader, encoding)
		}
		if traceparent != "" {
			msg.Header.Set("traceparent", traceparent)
		}
		reply, err := nc.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Fatalf("%s %q: no answer: %v", msg.Subject, body, err)
		}
		code, desc := reply.Header.Get(micro.ErrorCodeHeader), reply.Header.Get(micro.ErrorHeader)
		if code != "" && code != strconv.Itoa(protocol.CodeBadRequest) {
			t.Fatalf("%s %q: error %s %q; bad input must get a 400", msg.Subject, body, code, desc)
		}

		var wantErr error
		enc, encErr := requestEncoding(micro.Headers(msg.Header))
		switch {
		case encErr != nil:
			wantErr = encErr
		case ep == protocol.EndpointNext:
			if code != "" {
				t.Fatalf("uid.next %q: error %s %q", body, code, desc)
			}
			one := protocol.Decimal
			if enc == protocol.Base32 {
				one = enc
			}
			ids, err := one.Decode(nil, reply.Data)
			if err != nil || len(ids) != 1 {
				t.Fatalf("uid.next (%s): reply %q is not one ID: %v", enc, reply.Data, err)
			}
			record(t, ids)
			return
		case ep == protocol.EndpointBatch:
			n, perr := parseCount(body, maxBatchFor(maxBatch, nc.MaxPayload(), enc))
			if wantErr = perr; perr == nil {
				if code != "" {
					t.Fatalf("uid.batch %q: error %s %q for a valid count", body, code, desc)
				}
				ids, err := enc.Decode(nil, reply.Data)
				if err != nil || len(ids) != n {
					t.Fatalf("uid.batch %q (%s): %d IDs, %v; want %d", body, enc, len(ids), err, n)
				}
				for i := 1; i < len(ids); i++ {
					if ids[i] <= ids[i-1] {
						t.Fatalf("uid.batch: IDs not increasing at %d", i)
					}
				}
				record(t, ids)
				return
			}
		case ep == protocol.EndpointParse:
			id, perr := parseIDRequest(body, idForm{base32: enc == protocol.Base32})
			if wantErr = perr; perr == nil {
				parts, err := layout.Parse(id)
				if err != nil {
					t.Fatalf("parseIDRequest accepted %d, which the layout refuses: %v", id, err)
				}
				want, _ := parts.MarshalJSON()
				if code != "" || !bytes.Equal(reply.Data, want) {
					t.Fatalf("uid.parse %q: %q (error %s %q); want %s", body, reply.Data, code, desc, want)
				}
				return
			}
		}
		var se *protocol.ServiceError
		if !errors.As(wantErr, &se) || code != "400" || desc != se.Description || len(reply.Data) != 0 {
			t.Fatalf("%s %q: got %s %q body %q; want 400 %v", msg.Subject, body, code, desc, reply.Data, wantErr)
		}
	})
}

// headerValueOK reports whether s can travel as a NATS header value:
// printable ASCII without surrounding spaces (the header parser trims them).
func headerValueOK(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s == strings.TrimSpace(s)
}
