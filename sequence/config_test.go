package sequence

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// Validate names the field of each bad setting, zero reads as the
// default, SettingName names the other setting a reason mentions, and
// NewAllocator refuses what Validate refuses.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		field   string // "": valid
		mention string
	}{
		{Config{}, "", ""},
		{Config{MinStep: 1, MaxStep: 1, Target: time.Second}, "", ""},
		{Config{MinStep: MaxValue + 1}, "MinStep", "above"},
		{Config{MinStep: 10, MaxStep: 9}, "MaxStep", "below VAR_MinStep 10"},
		{Config{MinStep: 2_000_000}, "MaxStep", "1000000 is below VAR_MinStep 2000000"},
		{Config{MaxStep: MaxValue + 1}, "MaxStep", "above"},
		{Config{Target: 999 * time.Millisecond}, "Target", "at least 1s"},
		{Config{Target: -time.Second}, "Target", "at least 1s"},
	} {
		c.cfg.SettingName = func(field string) string { return "VAR_" + field }
		err := c.cfg.Validate()
		var se *setting.Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v, want nil", c.cfg, err)
		case c.field != "" && (!errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Reason, c.mention)):
			t.Errorf("%+v: %v, want a *setting.Error of %s mentioning %q", c.cfg, err, c.field, c.mention)
		case c.field != "":
			if a, err := NewAllocator(nil, c.cfg); err == nil {
				a.Close(context.Background())
				t.Errorf("%+v: NewAllocator accepted it", c.cfg)
			}
		}
	}
}
