package telemetry

import (
	"fmt"
	"os"
	"strconv"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultRootRequestRatio is the fraction of requests without trace
// context that the default sampler records as new traces.
const DefaultRootRequestRatio = 0.01

// DefaultSampler is the sampler Setup uses when OTEL_TRACES_SAMPLER is
// unset, instead of OpenTelemetry's parentbased_always_on:
//
//   - a span with a parent follows the parent's decision, so a caller that
//     traces its requests gets the dispenser's server spans in its traces;
//   - every padding round is recorded (a few a second at most);
//   - other roots, chiefly requests from callers that do not trace, are
//     recorded at rootRatio.
//
// Recording every request roughly doubles the CPU an ID costs (see
// BENCHMARKS.md); OTEL_TRACES_SAMPLER=parentbased_always_on does that when
// wanted.
func DefaultSampler(rootRatio float64) sdktrace.Sampler {
	return sdktrace.ParentBased(rootSampler{requests: sdktrace.TraceIDRatioBased(rootRatio)})
}

// rootSampler decides for spans without a parent.
type rootSampler struct {
	requests sdktrace.Sampler
}

func (s rootSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == PaddingSpanName {
		return sdktrace.AlwaysSample().ShouldSample(p)
	}
	return s.requests.ShouldSample(p)
}

func (s rootSampler) Description() string {
	return fmt.Sprintf("UidDispenserRoot{padding:AlwaysOn,other:%s}", s.requests.Description())
}

// checkSamplerEnv refuses the OTEL_TRACES_SAMPLER values the SDK would
// silently replace by its default, so that a typo stops start-up with the
// variable named instead of changing what is traced.
func checkSamplerEnv() error {
	name := os.Getenv("OTEL_TRACES_SAMPLER")
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG")
		if arg == "" {
			return nil // the SDK's ratio default, 1.0
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG: %q is not a ratio from 0 to 1", arg)
		}
		return nil
	}
	return fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER: %q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}
