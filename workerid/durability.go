package workerid

import (
	"fmt"
	"log/slog"
	"strings"
)

// DurabilityError refuses a store whose settings let it forget writes it
// acknowledged (StoreDurability=refuse). Findings say, each, which
// setting and what to change.
type DurabilityError struct {
	Store    string
	Findings []string
	Setting  string // the StoreDurability setting's name, for the advice
}

func (e *DurabilityError) Error() string {
	return fmt.Sprintf("workerid: %s may forget acknowledged writes, which can hand out an ID or a number twice: %s (docs/operations.md, \"What the guarantees assume\"; %s=%s starts anyway with a warning)",
		e.Store, strings.Join(e.Findings, "; "), e.Setting, DurabilityWarn)
}

// CheckDurability applies StoreDurability to what a store found about its
// own durability: nothing found, nil; else a warning per finding, or with
// DurabilityRefuse a *DurabilityError.
func (c Config) CheckDurability(store string, findings []string) error {
	c = c.WithDefaults()
	if len(findings) == 0 {
		return nil
	}
	if c.StoreDurability == DurabilityRefuse {
		return &DurabilityError{Store: store, Findings: findings, Setting: c.Name("StoreDurability")}
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, f := range findings {
		log.Warn("workerid: the store may forget acknowledged writes: "+f, "store", store, "loss_window", c.LossWindow(),
			"refuse_with", c.Name("StoreDurability")+"="+string(DurabilityRefuse))
	}
	return nil
}
