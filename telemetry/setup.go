package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/uid-dispenser/uid-dispenser/telemetry/uidattr"
)

// ServiceName is the default service.name of the resource;
// OTEL_SERVICE_NAME overrides it.
const ServiceName = "uid-dispenser"

// regionLabel is uid.region as a Prometheus label, as the exporter
// writes the resource attribute.
const regionLabel = "uid_region"

// WorkerIDKey is the attribute that carries the worker ID, on the resource
// (when known at set-up), on padding spans and on the generator's gauges.
const WorkerIDKey = uidattr.WorkerID

// Config configures [Setup]. The zero value is valid: no HTTP server,
// exporters from the OTEL_* environment variables (none when unset).
type Config struct {
	// ServiceVersion is service.version; empty: the main module's version
	// from the build info.
	ServiceVersion string
	// InstanceID is service.instance.id; empty: host name and process ID.
	InstanceID string
	// WorkerID, when not nil, is put on the resource as uid.worker_id.
	// Instances that set telemetry up before they claim a worker ID leave
	// it nil; spans and gauges carry the worker ID anyway.
	WorkerID *uint64
	// Region, when set, is put on the resource as uid.region.
	Region string

	// MetricsAddr is the listen address of the HTTP server with /metrics
	// (Prometheus), /healthz and /readyz, such as ":9464" or
	// "127.0.0.1:0"; empty: no server.
	MetricsAddr string
	// Ready backs /readyz: it returns nil while the instance holds a valid
	// worker claim and serves, and why not otherwise. Nil: not ready until
	// SetReady installs a check.
	Ready func() error
	// RunwayWarning is the default of ObserverConfig.RunwayWarning for
	// observers made with [Telemetry.NewObserver].
	RunwayWarning time.Duration

	// SpanProcessors are added to the tracer provider besides the
	// exporter's batch processor (tests pass an in-memory recorder).
	SpanProcessors []sdktrace.SpanProcessor
	// Sampler overrides OTEL_TRACES_SAMPLER and the default sampling
	// (follow the caller, record every padding round and
	// DefaultRootRequestRatio of the other roots).
	Sampler sdktrace.Sampler
	// Logger receives OpenTelemetry's own errors (failed exports) and the
	// observers' warnings; nil: slog.Default().
	Logger *slog.Logger
}

// Telemetry is the set-up made by [Setup]: the providers, which Setup also
// installs as the global ones, and the HTTP server. Shut it down to flush.
type Telemetry struct {
	cfg            Config
	logger         *slog.Logger
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	shutdowns      []func(context.Context) error
	ready          atomic.Pointer[func() error]

	server      *http.Server
	listener    net.Listener
	serveDone   chan struct{}
	shutdownErr error
	once        sync.Once
}

// Setup builds the tracer and meter providers from cfg and the OTEL_*
// environment variables, installs them and the W3C tracecontext and
// baggage propagators as the global ones, and starts the HTTP server when
// cfg.MetricsAddr is set. Call Shutdown on the result to flush and stop.
func Setup(ctx context.Context, cfg Config) (_ *Telemetry, err error) {
	t := &Telemetry{cfg: cfg, logger: cfg.Logger}
	if cfg.Ready != nil {
		t.SetReady(cfg.Ready)
	}
	if t.logger == nil {
		t.logger = slog.Default()
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.shutdownProviders(context.WithoutCancel(ctx)))
		}
	}()

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	if err := t.setupTracing(ctx, res); err != nil {
		return nil, err
	}
	registry, err := t.setupMetrics(ctx, res)
	if err != nil {
		return nil, err
	}
	if cfg.MetricsAddr != "" {
		if err := t.startServer(cfg.MetricsAddr, registry); err != nil {
			return nil, err
		}
	}

	otel.SetTracerProvider(t.tracerProvider)
	otel.SetMeterProvider(t.meterProvider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	logger := t.logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "err", err)
	}))
	return t, nil
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	version := cfg.ServiceVersion
	if version == "" {
		version = "(devel)"
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
			version = info.Main.Version
		}
	}
	instance := cfg.InstanceID
	if instance == "" {
		host, _ := os.Hostname()
		instance = host + "-" + strconv.Itoa(os.Getpid())
	}
	attrs := []attribute.KeyValue{
		semconv.ServiceNameKey.String(ServiceName),
		semconv.ServiceVersionKey.String(version),
		semconv.ServiceInstanceIDKey.String(instance),
	}
	if cfg.WorkerID != nil {
		attrs = append(attrs, WorkerIDKey.Int64(int64(*cfg.WorkerID)))
	}
	if cfg.Region != "" {
		attrs = append(attrs, uidattr.Region.String(cfg.Region))
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults above.
	return resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithProcessRuntimeVersion(),
		resource.WithFromEnv(),
	)
}

// otlpSpanExporterFromEnv is the exporter when the environment asks for
// OTLP traces (OTEL_TRACES_EXPORTER=otlp, or unset with an OTLP endpoint
// set): otlpSpanExporter over the client of the protocol it names
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf), the choice autoexport would make: autoexport
// registers its own "otlp" and refuses a second registration, so the
// choice is made here first. Nil when it asks for another exporter, which
// autoexport makes.
func otlpSpanExporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch name := os.Getenv("OTEL_TRACES_EXPORTER"); {
	case name == "otlp":
	case name == "" && otlpEndpointSet("TRACES"):
	default:
		return nil, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var client otlptrace.Client
	switch protocol {
	case "", "http/protobuf":
		client = otlptracehttp.NewClient()
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc or http/protobuf", protocol)
	}
	return newOTLPSpanExporter(ctx, client)
}

// otlpEndpointSet reports whether an OTLP endpoint is configured for the
// signal, which makes OTLP its default exporter.
func otlpEndpointSet(signal string) bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

func (t *Telemetry) setupTracing(ctx context.Context, res *resource.Resource) error {
	if err := checkSamplerEnv(); err != nil {
		return err
	}
	batching, err := batcherConfigFromEnv()
	if err != nil {
		return err
	}
	var opts []autoexport.SpanOption
	if !otlpEndpointSet("TRACES") {
		opts = append(opts, autoexport.WithFallbackSpanExporter(func(context.Context) (sdktrace.SpanExporter, error) {
			return nil, nil
		}))
	}
	exporter, err := otlpSpanExporterFromEnv(ctx)
	if err == nil && exporter == nil {
		exporter, err = autoexport.NewSpanExporter(ctx, opts...)
	}
	if err != nil {
		return fmt.Errorf("telemetry: traces exporter (OTEL_TRACES_EXPORTER): %w", err)
	}
	exporting := exporter != nil && !autoexport.IsNoneSpanExporter(exporter)
	if !exporting && len(t.cfg.SpanProcessors) == 0 {
		// Nothing would see the spans: the no-op provider still passes a
		// caller's trace context on and costs next to nothing.
		t.tracerProvider = tracenoop.NewTracerProvider()
		return nil
	}
	providerOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	defaults := false
	switch {
	case t.cfg.Sampler != nil:
		providerOpts = append(providerOpts, sdktrace.WithSampler(t.cfg.Sampler))
	case os.Getenv("OTEL_TRACES_SAMPLER") == "":
		defaults = true
		providerOpts = append(providerOpts, sdktrace.WithSampler(defaultSDKSampler()))
	}
	if exporting {
		providerOpts = append(providerOpts, sdktrace.WithSpanProcessor(newSpanBatcher(exporter, batching)))
	}
	for _, p := range t.cfg.SpanProcessors {
		providerOpts = append(providerOpts, sdktrace.WithSpanProcessor(p))
	}
	tp := sdktrace.NewTracerProvider(providerOpts...)
	t.tracerProvider = tp
	if defaults {
		t.tracerProvider = defaultSampling(tp)
	}
	t.shutdowns = append(t.shutdowns, tp.Shutdown)
	return nil
}

// setupMetrics builds the meter provider; it returns the Prometheus
// registry when the HTTP server is configured.
func (t *Telemetry) setupMetrics(ctx context.Context, res *resource.Resource) (*prometheus.Registry, error) {
	var readers []sdkmetric.Reader
	var opts []autoexport.MetricOption
	if !otlpEndpointSet("METRICS") {
		opts = append(opts, autoexport.WithFallbackMetricReader(func(context.Context) (sdkmetric.Reader, error) {
			return nil, nil
		}))
	}
	reader, err := autoexport.NewMetricReader(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: metrics exporter (OTEL_METRICS_EXPORTER): %w", err)
	}
	if reader != nil && !autoexport.IsNoneMetricReader(reader) {
		readers = append(readers, reader)
	} else if reader != nil {
		_ = reader.Shutdown(ctx)
	}
	var registry *prometheus.Registry
	if t.cfg.MetricsAddr != "" {
		registry = prometheus.NewRegistry()
		// Every series carries the region, so that one Prometheus (or
		// one dashboard) across regions can tell them apart: the OTel
		// series from the resource's uid.region as a constant label
		// (target_info has it anyway), the others (Go, process, the
		// /metrics handler's) from the registerer they are given.
		t.labelled(registry).MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exporter, err := promexporter.New(promexporter.WithRegisterer(registry),
			promexporter.WithResourceAsConstantLabels(attribute.NewAllowKeysFilter(uidattr.Region)))
		if err != nil {
			for _, r := range readers {
				_ = r.Shutdown(ctx)
			}
			return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
		}
		readers = append(readers, exporter)
	}
	if len(readers) == 0 {
		t.meterProvider = metricnoop.NewMeterProvider()
		return nil, nil
	}
	providerOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	for _, r := range readers {
		providerOpts = append(providerOpts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(providerOpts...)
	t.meterProvider = mp
	t.shutdowns = append(t.shutdowns, mp.Shutdown)
	return registry, nil
}

// labelled is registry with the region as a constant label of every
// collector registered through it (registry itself without a region).
func (t *Telemetry) labelled(registry *prometheus.Registry) prometheus.Registerer {
	if t.cfg.Region == "" {
		return registry
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{regionLabel: t.cfg.Region}, registry)
}

// TracerProvider is the tracer provider Setup installed globally.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracerProvider }

// MeterProvider is the meter provider Setup installed globally.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meterProvider }

// MetricsAddr is the address the HTTP server listens on (useful with port
// 0), or "" when there is none.
func (t *Telemetry) MetricsAddr() string {
	if t.listener == nil {
		return ""
	}
	return t.listener.Addr().String()
}

// SetReady replaces the readiness check behind /readyz (see Config.Ready),
// for instances built after their telemetry.
func (t *Telemetry) SetReady(check func() error) { t.ready.Store(&check) }

// NewObserver is [NewObserver] with the providers and runway warning of
// this set-up as defaults.
func (t *Telemetry) NewObserver(opts ObserverConfig) (*Observer, error) {
	if opts.TracerProvider == nil {
		opts.TracerProvider = t.tracerProvider
	}
	if opts.MeterProvider == nil {
		opts.MeterProvider = t.meterProvider
	}
	if opts.RunwayWarning == 0 {
		opts.RunwayWarning = t.cfg.RunwayWarning
	}
	if opts.Logger == nil {
		opts.Logger = t.logger
	}
	return NewObserver(opts)
}

// Shutdown flushes buffered spans and metrics to the exporters, then stops
// them and the HTTP server. Later calls return the first call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		err := t.shutdownProviders(ctx)
		if t.server != nil {
			if serr := t.server.Shutdown(ctx); serr != nil {
				err = errors.Join(err, fmt.Errorf("telemetry: HTTP server: %w", serr))
				_ = t.server.Close()
			}
			<-t.serveDone
		}
		t.shutdownErr = err
	})
	return t.shutdownErr
}

func (t *Telemetry) shutdownProviders(ctx context.Context) error {
	var errs []error
	for _, shutdown := range t.shutdowns {
		if err := shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	t.shutdowns = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
