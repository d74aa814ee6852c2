package dispenser

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/telemetry"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// withTelemetry makes the instance use tel (built by the caller, which
// shuts it down) instead of setting telemetry up from the configuration:
// the tests, which read what the instance records. The instance
// installs its readiness check in tel.
func withTelemetry(tel *telemetry.Telemetry) Option {
	return func(o *options) { o.telemetry = tel }
}

// errNotServing is the readiness check's answer before Start has finished
// and after the instance stopped serving.
var errNotServing = errors.New("not serving")

// errOutOfQueueGroup: the ID endpoints have not joined the queue group
// again since the instance left it (leaveQueueGroup, joinQueueGroup).
var errOutOfQueueGroup = errors.New("the ID endpoints are out of the queue group")

// instanceTelemetry is the dispenser's part of telemetry.
type instanceTelemetry struct {
	tel      *telemetry.Telemetry
	owned    bool // set up by Start, shut down by Shutdown
	observer *telemetry.Observer
	serving  atomic.Bool
	// components unregisters the metrics of the block publisher and the
	// sequences (observeComponents); nil before.
	components interface{ Unregister() error }
}

// startTelemetry sets telemetry up (unless withTelemetry gave it) once the
// worker ID is known, so that the resource carries it, and before the
// generator and the service, whose spans and metrics it receives.
func (d *Dispenser) startTelemetry(ctx context.Context, given *telemetry.Telemetry, workerID uint64) error {
	d.telemetry.tel = given
	if given == nil {
		threshold, err := telemetry.ParseRunway(d.cfg.RunwayWarning)
		if err != nil {
			return fmt.Errorf("dispenser: %s_RUNWAY_WARNING: %w", EnvPrefix, err)
		}
		d.telemetry.tel, err = telemetry.Setup(ctx, telemetry.Config{
			WorkerID:       &workerID,
			Region:         d.cfg.Region,
			ServiceVersion: Build().Version,
			MetricsAddr:    d.cfg.MetricsAddr,
			RunwayWarning:  threshold,
			Logger:         d.log,
		})
		var se *setting.Error
		if errors.As(err, &se) {
			// Not a *ConfigError: the address is valid, only busy now.
			return fmt.Errorf("dispenser: %s: %s: %w", settingVar[telemetry.Config](se.Field), se.Reason, se.Err)
		}
		if err != nil {
			return fmt.Errorf("dispenser: %w", err)
		}
		d.telemetry.owned = true
		if addr := d.telemetry.tel.MetricsAddr(); addr != "" {
			d.log.Info("serving /metrics, /healthz and /readyz", "addr", addr)
		} else {
			d.log.Info("no /metrics, /healthz or /readyz: off by default, set " + EnvPrefix + "_METRICS_ADDR (e.g. :9464) to serve them")
		}
	}
	d.telemetry.tel.SetReady(d.ready)
	obs, err := d.telemetry.tel.NewObserver(telemetry.ObserverConfig{
		Layout:    d.cfg.Layout(),
		WorkerID:  workerID,
		LeaseLeft: d.leaseLeft,
	})
	if err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	d.telemetry.observer = obs
	return nil
}

// stopTelemetry closes the observer and, when Start set telemetry up,
// flushes what is buffered and stops the exporters and the HTTP server.
func (d *Dispenser) stopTelemetry(ctx context.Context) error {
	d.telemetry.serving.Store(false)
	var errs []error
	if d.telemetry.components != nil {
		errs = append(errs, d.telemetry.components.Unregister())
	}
	if d.telemetry.observer != nil {
		errs = append(errs, d.telemetry.observer.Close())
	}
	if d.telemetry.owned {
		if ctx.Err() != nil {
			// Out of time already, but a flush is worth a moment.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
		}
		errs = append(errs, d.telemetry.tel.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// observeComponents exports the metrics of the block publisher and the
// named sequences, those of the two the instance runs, once both exist.
func (d *Dispenser) observeComponents() error {
	var cfg telemetry.ComponentsConfig
	if blocks := d.blocks; blocks != nil {
		cfg.Blocks = func() telemetry.BlockStats {
			s := blocks.Stats()
			return telemetry.BlockStats{Depth: s.Depth, Published: s.Published, Refused: s.Refused, Pressure: s.Pressure, Failed: s.Failed,
				IDsPublished: s.IDsPublished, IDsDiscarded: s.IDsDiscarded}
		}
	}
	if seq := d.seq; seq != nil {
		cfg.Sequences = func() []telemetry.SequenceStats {
			stats := seq.Stats()
			out := make([]telemetry.SequenceStats, len(stats))
			for i, s := range stats {
				out[i] = telemetry.SequenceStats{Name: s.Name, Left: s.Left, Held: s.Held, Segments: s.Segments, Waits: s.Waits, WaitTime: s.WaitTime}
			}
			return out
		}
		cfg.SequencesServing = func() bool { return !d.seqOut.Load() }
	}
	cfg.StoreRegressions = d.storeRegressions
	if e, ok := d.assigner.(interface{ EpochChanges() uint64 }); ok {
		cfg.StoreEpochChanges = e.EpochChanges
	}
	reg, err := d.telemetry.tel.ObserveComponents(cfg)
	if err != nil {
		return fmt.Errorf("dispenser: %w", err)
	}
	d.telemetry.components = reg
	return nil
}

// storeRegressions counts the store's forgotten writes found by the
// leases (every claim of the assigner) and the sequences.
func (d *Dispenser) storeRegressions() map[string]uint64 {
	out := map[string]uint64{}
	if r, ok := d.assigner.(interface{ Regressions() uint64 }); ok {
		out[telemetry.RecordLease] = r.Regressions()
	}
	if r, ok := d.assigner.(interface{ StreamRegressions() uint64 }); ok {
		out[telemetry.RecordStream] = r.StreamRegressions()
	}
	if d.seq != nil {
		out[telemetry.RecordSequence] = d.seq.Regressions()
	}
	return out
}

// newGenerator builds the ring buffer on claim, observed by telemetry.
func (d *Dispenser) newGenerator(claim uidcore.Claim) (*uidcore.CachedGenerator, error) {
	obs := d.telemetry.observer
	obs.SetWorkerID(claim.WorkerID())
	gen, err := uidcore.NewCached(d.generatorOptions(claim, obs))
	if err == nil {
		obs.Watch(gen)
	}
	return gen, err
}

// generatorOptions are the ring buffer's options on claim. Its floor is
// the joined generation's StartsAfter: the instance waited for that
// second on its clock (workerid.WaitForStart), but a clock stepped back
// afterwards must not bring IDs at or below it, which the old
// generation's may reach.
func (d *Dispenser) generatorOptions(claim uidcore.Claim, obs uidcore.Observer) uidcore.CachedOptions {
	opts := d.cfg.cachedOptions(claim, d.lanes(), obs)
	opts.Floor = d.joined.StartsAfter
	return opts
}

// ready backs /readyz: the instance has started, is not shutting down,
// holds a valid worker claim and can issue an ID now: the time field has
// seconds left and the ring is not empty at its end.
func (d *Dispenser) ready() error {
	if !d.telemetry.serving.Load() {
		return errNotServing
	}
	select {
	case <-d.done:
		return errNotServing
	default:
	}
	if err := d.claimStatus(); err != nil {
		return err
	}
	if d.notIssuing.Load() {
		return errOutOfQueueGroup
	}
	return d.canIssue(time.Now())
}

// canIssue says why no ID can be issued at now, or nil. Only a bound that
// lasts counts: a ring drained under load (at the ahead-of-clock bound)
// refills within a second, and marking the instance unready for that
// would push its share onto peers that are just as loaded.
func (d *Dispenser) canIssue(now time.Time) error {
	layout := d.cfg.Layout()
	if end := layout.RunwayEnd(); !now.Before(end) {
		return fmt.Errorf("the layout's time field ran out at %s", end.Format(time.RFC3339))
	}
	d.mu.Lock()
	source := d.source
	d.mu.Unlock()
	if source == nil {
		return errNotServing
	}
	if st := source.State(); st.Available == 0 && st.LogicalSecond > layout.LastSecond() {
		return fmt.Errorf("the ring is empty and padding has reached the time field's end (%s)", layout.RunwayEnd().Format(time.RFC3339))
	}
	return nil
}

// leaseLeft is the time left on a leased worker claim.
func (d *Dispenser) leaseLeft() (time.Duration, bool) {
	d.mu.Lock()
	claim := d.claim
	d.mu.Unlock()
	if lease, ok := claim.(interface{ TimeLeft() time.Duration }); ok {
		return lease.TimeLeft(), true
	}
	return 0, false
}

// MetricsAddr is the address of the /metrics, /healthz and /readyz server,
// or "" when there is none.
func (d *Dispenser) MetricsAddr() string {
	if d.telemetry.tel == nil {
		return ""
	}
	return d.telemetry.tel.MetricsAddr()
}
