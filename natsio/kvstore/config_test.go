package kvstore_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// TestDefaultConfig: the defaults are valid, hold workerid's, and a zero
// Config takes them.
func TestDefaultConfig(t *testing.T) {
	c := kvstore.DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if c.Bucket != "uid_workers" || c.Replicas != 0 || !reflect.DeepEqual(c.Config, workerid.DefaultConfig()) {
		t.Errorf("DefaultConfig = %+v", c)
	}
	if zero := (kvstore.Config{}).WithDefaults(); !reflect.DeepEqual(zero, c) {
		t.Errorf("zero Config with defaults\n %+v\nwant DefaultConfig\n %+v", zero, c)
	}
	if set := (kvstore.Config{Replicas: 3}).WithDefaults(); set.Replicas != 3 || set.Bucket != c.Bucket {
		t.Errorf("WithDefaults changed a set value or missed a zero one: %+v", set)
	}
}

// Validate's errors name the Config field (the dispenser maps it to its
// variable), the shared settings' included; with regions the bucket is
// the region's.
func TestValidateNamesTheField(t *testing.T) {
	for field, c := range map[string]kvstore.Config{
		"Bucket":   {Bucket: "a.b"},
		"Replicas": {Replicas: 6},
		"Mode":     {Config: workerid.Config{Mode: "sticky"}},
	} {
		var se *setting.Error
		if err := c.Validate(); !errors.As(err, &se) || se.Field != field || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: err = %v, want a *setting.Error naming it", field, err)
		}
	}
	regions, err := workerid.ParseRegions("east=0-511,west=512-1023")
	if err != nil {
		t.Fatal(err)
	}
	c := kvstore.Config{Config: workerid.Config{Region: "east", Regions: regions}}.WithDefaults()
	if got := c.KVBucket(); got != "uid_workers_east" {
		t.Errorf("KVBucket with regions = %q, want uid_workers_east", got)
	}
}
