package natsio

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

func TestBlocksConfigDefaultsMatchTags(t *testing.T) {
	def := DefaultBlocksConfig()
	v := reflect.ValueOf(def)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		tag, ok := f.Tag.Lookup("default")
		if !ok {
			t.Errorf("%s has no default tag", f.Name)
			continue
		}
		var got string
		switch x := v.Field(i).Interface().(type) {
		case time.Duration:
			d, err := time.ParseDuration(tag)
			if err != nil || d != x {
				t.Errorf("%s: tag %q, DefaultBlocksConfig %s", f.Name, tag, x)
			}
			continue
		case bool:
			got = strconv.FormatBool(x)
		case int:
			got = strconv.Itoa(x)
		case string:
			got = x
		default:
			t.Fatalf("%s: unhandled type %T", f.Name, x)
		}
		if got != tag {
			t.Errorf("%s: tag %q, DefaultBlocksConfig %q", f.Name, tag, got)
		}
		if !strings.HasPrefix(f.Tag.Get("envconfig"), "BLOCKS_") || f.Tag.Get("desc") == "" {
			t.Errorf("%s: envconfig tag %q, desc %q", f.Name, f.Tag.Get("envconfig"), f.Tag.Get("desc"))
		}
	}
	if err := (BlocksConfig{BlocksEnabled: true}).Validate(); err != nil {
		t.Errorf("zero config with blocks enabled: %v", err)
	}
}

func TestBlocksConfigValidateNamesTheVariable(t *testing.T) {
	cases := []struct {
		mutate func(*BlocksConfig)
		envVar string
	}{
		{func(c *BlocksConfig) { c.BlocksStream = "UID.BLOCKS" }, "DISPENSER_BLOCKS_STREAM"},
		{func(c *BlocksConfig) { c.BlocksSubject = "uid.>" }, "DISPENSER_BLOCKS_SUBJECT"},
		{func(c *BlocksConfig) { c.BlocksSubject = "uid..blocks" }, "DISPENSER_BLOCKS_SUBJECT"},
		{func(c *BlocksConfig) { c.BlockSize = -1 }, "DISPENSER_BLOCKS_BLOCK_SIZE"},
		{func(c *BlocksConfig) { c.BlockSize = uidclient.MaxBlockSize + 1 }, "DISPENSER_BLOCKS_BLOCK_SIZE"},
		{func(c *BlocksConfig) { c.BlocksTargetDepth = -3 }, "DISPENSER_BLOCKS_TARGET_DEPTH"},
		{func(c *BlocksConfig) { c.BlocksStorage = "disk" }, "DISPENSER_BLOCKS_STORAGE"},
		{func(c *BlocksConfig) { c.BlocksReplicas = 7 }, "DISPENSER_BLOCKS_REPLICAS"},
		{func(c *BlocksConfig) { c.BlocksDuplicateWindow = time.Millisecond }, "DISPENSER_BLOCKS_DUPLICATE_WINDOW"},
		{func(c *BlocksConfig) { c.BlocksPollInterval = time.Microsecond }, "DISPENSER_BLOCKS_POLL_INTERVAL"},
	}
	for _, tc := range cases {
		c := DefaultBlocksConfig()
		c.BlocksEnabled = true
		tc.mutate(&c)
		err := c.Validate()
		var ce *BlocksConfigError
		if !errors.As(err, &ce) || ce.Var != tc.envVar || !strings.Contains(err.Error(), tc.envVar) {
			t.Errorf("%+v: error %v, want one naming %s", c, err, tc.envVar)
		}
		c.BlocksEnabled = false
		if err := c.Validate(); err != nil {
			t.Errorf("disabled blocks config rejected: %v", err)
		}
	}
}
