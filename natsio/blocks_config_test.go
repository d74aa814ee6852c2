package natsio

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// A zero BlocksConfig is the default one, and valid.
func TestBlocksConfigZeroTakesTheDefaults(t *testing.T) {
	got := BlocksConfig{}.withDefaults()
	want := DefaultBlocksConfig()
	if got.Logger == nil {
		t.Error("no default logger")
	}
	got.Logger = nil
	if got != want {
		t.Errorf("zero config with defaults %+v, want %+v", got, want)
	}
	if err := (BlocksConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if want.Stream != protocol.DefaultBlocksStream || want.BlockSize != protocol.DefaultBlockSize {
		t.Errorf("defaults differ from what BlockSource assumes: %+v", want)
	}
}

// Validate's errors name the field (the dispenser maps it to its
// variable; its tests check the variable names).
func TestBlocksConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		mutate func(*BlocksConfig)
		field  string
	}{
		{func(c *BlocksConfig) { c.Stream = "UID.BLOCKS" }, "Stream"},
		{func(c *BlocksConfig) { c.Subject = "uid.>" }, "Subject"},
		{func(c *BlocksConfig) { c.Subject = "uid..blocks" }, "Subject"},
		{func(c *BlocksConfig) { c.BlockSize = -1 }, "BlockSize"},
		{func(c *BlocksConfig) { c.BlockSize = protocol.MaxRunsBlockSize + 1 }, "BlockSize"},
		{func(c *BlocksConfig) { c.BlockSize, c.BinaryBlocks = protocol.MaxBlockSize+1, true }, "BlockSize"},
		{func(c *BlocksConfig) { c.TargetDepth = -3 }, "TargetDepth"},
		{func(c *BlocksConfig) { c.Storage = "disk" }, "Storage"},
		{func(c *BlocksConfig) { c.Replicas = 7 }, "Replicas"},
		{func(c *BlocksConfig) { c.DuplicateWindow = time.Millisecond }, "DuplicateWindow"},
		{func(c *BlocksConfig) { c.PollInterval = time.Microsecond }, "PollInterval"},
	}
	for _, tc := range cases {
		c := DefaultBlocksConfig()
		tc.mutate(&c)
		err := c.Validate()
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != tc.field || !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("%+v: error %v, want one naming %s", c, err, tc.field)
		}
	}
}
