// Package telemetry sets up OpenTelemetry for a dispenser: the tracer and
// meter providers with their exporters, the W3C propagators, a Prometheus
// endpoint with liveness and readiness checks, and an observer that turns
// what a uidcore.CachedGenerator does into spans, events and metrics.
//
// It is the only package of the module that builds providers and
// exporters. Other packages (natsio) use the OpenTelemetry API only, with
// the providers they are given in their configuration
// (natsio.ServiceConfig's TracerProvider and MeterProvider, which the
// dispenser takes from [Telemetry]); they fall back to the global
// providers, which [Setup] also installs, only where none is given.
//
// # Configuration
//
// Exporters follow the standard OpenTelemetry environment variables, read
// by go.opentelemetry.io/contrib/exporters/autoexport:
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER (otlp, console, none,
// and prometheus for metrics), OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and the batch processor's OTEL_BSP_* settings (read
// here: spanBatcher batches in place of the SDK's processor, and its queue
// holds 8,192 spans by default, not 2,048). One
// default differs from the specification: when neither an exporter nor an
// OTLP endpoint is set, nothing is exported (the specification's default,
// OTLP to localhost, would log connection errors on every export on a
// machine without a collector). Setting OTEL_EXPORTER_OTLP_ENDPOINT alone
// turns OTLP export on. OTLP traces are encoded here (otlpSpanExporter: the
// SDK exporter's conversion to generated structs cost most of what
// recording a request costs) and sent by the SDK's OTLP/HTTP or gRPC
// client, which reads the OTEL_EXPORTER_OTLP_* settings as documented. Another: unless OTEL_TRACES_SAMPLER is set, the
// sampling follows the caller, records every padding round and
// [DefaultRootRequestRatio] (1%) of other roots, rather than
// parentbased_always_on; the roots not recorded start no span at all.
//
// The dispenser passes its own settings in [Config]: DISPENSER_METRICS_ADDR
// (the address of the HTTP server with /metrics, /healthz and /readyz;
// empty: no server) and DISPENSER_RUNWAY_WARNING (warn when the ID
// layout's time field runs out sooner than this, default a year; see
// [ParseRunway]).
//
// # Names
//
// Spans: "uid.padding" for each padding round of a ring buffer, with the
// events "uid.put.rejected" (on the padding span) and "uid.take.rejected"
// (on the span of the request that met the empty ring). Metrics of the
// generator (meter "github.com/uid-dispenser/uid-dispenser/telemetry"):
//
//	uid.padding.rounds      counter    trigger, stop (full or the put rejection reason)
//	uid.padding.duration    histogram  seconds, trigger
//	uid.padding.ids         counter    IDs put into the ring
//	uid.put.rejections      counter    reason
//	uid.take.rejections     counter    reason
//	uid.generator.issued    counter    IDs taken from the ring
//	uid.ring.available      gauge      IDs ready to take
//	uid.ring.fill           gauge      available / ring size (0..1)
//	uid.clock.ahead         gauge      seconds the logical second runs ahead of the wall clock
//	uid.runway.remaining    gauge      seconds until the layout's time field is exhausted
//	uid.runway.warning      gauge      1 while the runway is under the warning threshold
//	uid.lease.remaining     gauge      seconds left on the worker-ID lease
//
// The generator's gauges carry uid.worker_id. [ObserveComponents] adds, over what
// the dispenser's block publisher and sequence allocator report:
//
//	uid.blocks.depth        gauge      blocks in the stream at the last check
//	uid.blocks.published    counter    blocks stored
//	uid.blocks.refused      counter    publishes the full stream refused (held, sent again)
//	uid.blocks.pressure     counter    blocks refused for lack of room in JetStream
//	uid.blocks.failed       counter    blocks given up after errors
//	uid.blocks.ids.published counter   IDs in the blocks stored
//	uid.blocks.ids.discarded counter   IDs taken for blocks and never stored
//	uid.sequence.left       gauge      numbers left in the current segment, uid.sequence
//	uid.sequence.held       gauge      numbers left in every segment held, uid.sequence
//	uid.sequence.segments   counter    segments taken from the store, uid.sequence
//	uid.sequence.waits      counter    requests that waited for a segment, uid.sequence
//
// natsio adds, per request (meter
// "github.com/uid-dispenser/uid-dispenser/natsio"):
//
//	uid.requests            counter    uid.endpoint, uid.outcome (ok, bad_request, unavailable, internal)
//	uid.request.duration    histogram  seconds, uid.endpoint, uid.outcome
//	uid.ids.issued          counter    IDs sent to requesters, uid.endpoint
//
// and the spans "process uid.next" (server, per request, a child of the
// caller's trace context); the client, natsio/uidclient, makes "send
// uid.next" (tracer "github.com/uid-dispenser/uid-dispenser/natsio/uidclient").
//
// In Prometheus's text format the dots become underscores, counters get
// a _total suffix and units a _seconds or _ratio suffix
// (uid_padding_rounds_total, uid_padding_duration_seconds_bucket,
// uid_ring_fill_ratio, uid_requests_total, ...).
package telemetry
