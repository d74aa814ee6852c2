package workerid_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := workerid.DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if c.Mode != workerid.ModeLeased {
		t.Errorf("default mode %q", c.Mode)
	}
	// Zero values are the defaults.
	if err := (workerid.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config is invalid: %v", err)
	}
	if zero := (workerid.Config{}).WithDefaults(); !reflect.DeepEqual(zero, c) {
		t.Errorf("zero Config with defaults\n %+v\nwant DefaultConfig\n %+v", zero, c)
	}
	set := workerid.Config{LeaseTTL: time.Minute, StoreStartupDeadline: -1}.WithDefaults()
	if set.LeaseTTL != time.Minute || set.StoreStartupDeadline != -1 || set.ReserveChunk != c.ReserveChunk {
		t.Errorf("WithDefaults changed a set value or missed a zero one: %+v", set)
	}
}

// Validate's errors name the Config field (the dispenser maps it to its
// variable; its tests check the variable names).
func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		set     func(*workerid.Config)
		field   string
		mention string
	}{
		{func(c *workerid.Config) { c.Mode = "sticky" }, "Mode", "sticky"},
		{func(c *workerid.Config) { c.LeaseTTL = 500 * time.Millisecond }, "LeaseTTL", "500ms"},
		{func(c *workerid.Config) { c.ReserveChunk = -time.Second }, "ReserveChunk", "-1s"},
	}
	for _, tc := range cases {
		c := workerid.DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("%s: err = %v, want a *setting.Error naming it", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) || !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("%s: %q does not mention %q", tc.field, err, tc.mention)
		}
	}
}

// A message that tells the operator to change a setting names it as
// SettingName says, and by its field name without one.
func TestSettingName(t *testing.T) {
	c := workerid.DefaultConfig()
	c.Mode = workerid.ModeDisposable
	layout := uidcore.Layout{TimeBits: 52, WorkerBits: 3, SeqBits: 8, Epoch: uidcore.DefaultEpoch}
	if _, err := c.DisposableClaim(8, layout, "WORKER_NODE"); err == nil || !strings.Contains(err.Error(), "or Mode=leased on its own table") {
		t.Errorf("without SettingName: %v", err)
	}
	c.SettingName = func(field string) string { return "APP_" + strings.ToUpper(field) }
	if _, err := c.DisposableClaim(8, layout, "WORKER_NODE"); err == nil || !strings.Contains(err.Error(), "or APP_MODE=leased on its own table") || !errors.Is(err, workerid.ErrWorkerIDsExhausted) {
		t.Errorf("with SettingName: %v", err)
	}
	if claim, err := c.DisposableClaim(7, layout, "WORKER_NODE"); err != nil || claim.WorkerID() != 7 {
		t.Errorf("worker ID 7 of 8: %v %v", claim, err)
	}
}

// With a loss window the reserve chunk must exceed W + TTL/3 (plus the
// caller's ahead bound, CheckChunk): a lease issues only the reservation
// confirmed W and a renewal ago. Unset, it is a minute plus W, and with
// W = 0 a minute, as before the loss window.
func TestReserveChunkFollowsTheLossWindow(t *testing.T) {
	if c := workerid.DefaultConfig(); c.ReserveChunk != time.Minute+c.StoreLossWindow {
		t.Errorf("default chunk %s, want a minute plus W %s", c.ReserveChunk, c.StoreLossWindow)
	}
	if c := (workerid.Config{StoreLossWindow: -1}).WithDefaults(); c.ReserveChunk != time.Minute {
		t.Errorf("default chunk with W = 0: %s, want 1m", c.ReserveChunk)
	}
	short := workerid.Config{ReserveChunk: time.Minute, SettingName: func(f string) string { return "APP_" + f }}
	err := short.Validate()
	var se *setting.Error
	if !errors.As(err, &se) || se.Field != "ReserveChunk" || !strings.Contains(err.Error(), "APP_StoreLossWindow (2m0s) + APP_LeaseTTL/3 (10s) = 2m10s") {
		t.Errorf("chunk 1m with W 2m: %v", err)
	}
	if err := short.CheckChunk(2*time.Second, "APP_MAX_AHEAD"); err == nil || !strings.Contains(err.Error(), "+ APP_MAX_AHEAD (2s) = 2m12s") {
		t.Errorf("CheckChunk with an ahead bound: %v", err)
	}
	ok := workerid.Config{ReserveChunk: 133 * time.Second}
	if err := ok.CheckChunk(2*time.Second, "APP_MAX_AHEAD"); err != nil {
		t.Errorf("chunk 2m13s with W 2m, TTL 30s, ahead 2s: %v", err)
	}
	if err := (workerid.Config{ReserveChunk: time.Second, StoreLossWindow: -1}).Validate(); err != nil {
		t.Errorf("chunk 1s with W = 0: %v", err)
	}
}
