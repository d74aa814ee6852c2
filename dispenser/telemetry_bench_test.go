package dispenser

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/telemetry/telemetrytest"
)

// tracingBatch is the size of the uid.batch requests of BenchmarkTracing
// (binary), the bulk case of BenchmarkSustained.
const tracingBatch = 4096

// BenchmarkTracing is what tracing costs the dispenser's requests, uid.next
// and uid.batch (4,096 binary) side by side, 8 clients (each its own
// connection, one request at a time, callers that do not trace), a
// default dispenser and an embedded nats-server in this process, with
//   - tracing=off: no exporter configured (no-op tracer);
//   - tracing=default: OTLP over HTTP, the default sampler (1% of the
//     requests that carry no trace context);
//   - tracing=always_on-http: OTEL_TRACES_SAMPLER=always_on, every
//     request recorded, OTLP over HTTP (protobuf);
//   - tracing=always_on-grpc: the same over gRPC;
//
// each exporting to a receiver in this process that accepts and discards
// (an HTTP handler answering 200, a gRPC server implementing the
// collector's TraceService, neither decoding what it gets). One op is one request; req/s is the figure,
// cpu-ns/op the CPU time the whole process (clients, server, dispenser,
// exporter, receiver) spent per request. The receivers count the exports
// they get, to check that the spans went out.
func BenchmarkTracing(b *testing.B) {
	url := testenv.NATS(b, nil).ClientURL()
	var exports, runs atomic.Int64
	httpReceiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(httpReceiver.Close)
	grpcAddr := startGRPCReceiver(b, &exports)

	const clients = 8
	conns := make([]*nats.Conn, clients)
	for i := range conns {
		conns[i] = testConn(b, url).Conn
	}
	for _, endpoint := range []string{protocol.EndpointNext, protocol.EndpointBatch} {
		for _, tracing := range testenv.RoundOrder([]string{"off", "default", "always_on-http", "always_on-grpc"}) {
			b.Run("endpoint="+endpoint+"/tracing="+tracing, func(b *testing.B) {
				telemetrytest.ClearEnv(b)
				switch tracing {
				case "default", "always_on-http":
					b.Setenv("OTEL_TRACES_EXPORTER", "otlp")
					b.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
					b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", httpReceiver.URL+"/v1/traces")
				case "always_on-grpc":
					b.Setenv("OTEL_TRACES_EXPORTER", "otlp")
					b.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
					b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+grpcAddr)
				}
				if tracing != "off" && tracing != "default" {
					b.Setenv("OTEL_TRACES_SAMPLER", "always_on")
				}
				cfg := testConfig(url, "")
				// The defaults, lanes included (uid.batch from 8 clients
				// needs more than one worker ID's 4.19 M IDs/s), in a bucket
				// of its own per run: a recycled worker ID would start
				// after its previous holder's reservation.
				cfg.WorkerKVBucket = "bench_tracing_" + strconv.FormatInt(runs.Add(1), 10)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				d, err := Start(ctx, cfg, WithLogger(testLogger()))
				if err != nil {
					b.Fatal(err)
				}
				msg := func() *nats.Msg {
					if endpoint == protocol.EndpointNext {
						return &nats.Msg{Subject: protocol.Subject(cfg.SubjectPrefix, endpoint), Data: echoPayload}
					}
					return &nats.Msg{Subject: protocol.Subject(cfg.SubjectPrefix, endpoint), Data: []byte(strconv.Itoa(tracingBatch)),
						Header: nats.Header{protocol.EncodingHeader: {protocol.EncodingBinary}}}
				}
				before := exports.Load()
				cpuBefore := testenv.ProcessCPU(b)
				runClients(b, clients, func(i int) error {
					reply, err := conns[i].RequestMsg(msg(), 5*time.Second)
					if err == nil && reply.Header.Get(micro.ErrorCodeHeader) != "" {
						b.Errorf("error reply %s %s", reply.Header.Get(micro.ErrorCodeHeader), reply.Header.Get(micro.ErrorHeader))
					}
					return err
				})
				b.ReportMetric(float64(testenv.ProcessCPU(b)-cpuBefore)/float64(b.N), "cpu-ns/op")
				sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer scancel()
				if err := d.Shutdown(sctx); err != nil { // flushes the spans
					b.Fatal(err)
				}
				if got := exports.Load() - before; (tracing == "off") == (got > 0) && b.N >= 1000 {
					b.Fatalf("tracing %s: the receivers got %d exports", tracing, got)
				}
			})
		}
	}
}

// traceReceiver is a collector's TraceService that accepts and discards.
type traceReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	exports *atomic.Int64
}

func (r traceReceiver) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.exports.Add(1)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// discardCodec is the receiver's codec: it decodes no request (as the
// HTTP receiver reads none), so that the receiver, which in production
// runs elsewhere, costs this process as little as it can.
type discardCodec struct{}

func (discardCodec) Marshal(v any) ([]byte, error)      { return proto.Marshal(v.(proto.Message)) }
func (discardCodec) Unmarshal(data []byte, v any) error { return nil }
func (discardCodec) Name() string                       { return "proto" }

// startGRPCReceiver serves a traceReceiver on a loopback port and returns
// its address.
func startGRPCReceiver(b *testing.B, exports *atomic.Int64) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(grpc.ForceServerCodec(discardCodec{}))
	coltracepb.RegisterTraceServiceServer(s, traceReceiver{exports: exports})
	go func() { _ = s.Serve(l) }()
	b.Cleanup(s.Stop)
	return l.Addr().String()
}
