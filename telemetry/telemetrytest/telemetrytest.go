// Package telemetrytest holds what the tests of telemetry, natsio and
// dispenser need to read the telemetry they produce: a clean OTEL_*
// environment, the Prometheus text served on /metrics, the metrics an
// in-memory reader collected and the attributes of recorded spans.
// It depends on the OpenTelemetry SDK only (not on package telemetry), so
// telemetry's own tests can use it too.
package telemetrytest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// otelEnv are the variables that would change what the SDK exports.
var otelEnv = []string{
	"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SDK_DISABLED",
	"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT",
}

// ClearEnv empties the OTEL_* variables for the test, so that the
// machine's environment cannot change what the test exports.
func ClearEnv(t testing.TB) {
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
}

// HTTPGet fetches url with a client of its own, closed afterwards so that
// no keep-alive goroutine outlives the test.
func HTTPGet(url string) (status int, body string, err error) {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// PromSum sums the samples of a metric in Prometheus text format whose
// line contains every one of labels (`name="value"`); found reports
// whether there was one.
func PromSum(text, name string, labels ...string) (sum float64, found bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// MetricSum sums the data points of the named metric whose attributes
// include all of match (a histogram point counts its observations); found
// is false when the metric has no such point.
func MetricSum(rm metricdata.ResourceMetrics, name string, match ...attribute.KeyValue) (sum float64, found bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			add := func(attrs attribute.Set, v float64) {
				for _, kv := range match {
					if got, ok := attrs.Value(kv.Key); !ok || got != kv.Value {
						return
					}
				}
				sum += v
				found = true
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				addPoints(d.DataPoints, add)
			case metricdata.Sum[float64]:
				addPoints(d.DataPoints, add)
			case metricdata.Gauge[int64]:
				addPoints(d.DataPoints, add)
			case metricdata.Gauge[float64]:
				addPoints(d.DataPoints, add)
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, float64(dp.Count))
				}
			}
		}
	}
	return sum, found
}

// addPoints passes each data point's attributes and value to add.
func addPoints[N int64 | float64](points []metricdata.DataPoint[N], add func(attribute.Set, float64)) {
	for _, dp := range points {
		add(dp.Attributes, float64(dp.Value))
	}
}

// Attr returns the value of key among attrs (a span's or an event's), or
// an invalid value.
func Attr(attrs []attribute.KeyValue, key attribute.Key) attribute.Value {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
