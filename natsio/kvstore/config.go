package kvstore

import (
	"cmp"
	"fmt"
	"regexp"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// Config configures the KV store: the settings every store shares
// (workerid.Config) and the bucket's own. Zero values take
// DefaultConfig's (WithDefaults fills them in).
type Config struct {
	workerid.Config

	// Bucket is the bucket; with regions, the prefix of one bucket
	// per region (KVBucket).
	Bucket string
	// Replicas is the bucket's replica count when the dispenser
	// creates it, 1..5; 0: 3 in a clustered JetStream (fewer on a cluster
	// of fewer servers), 1 on a single server. One replica keeps every
	// lease and counter on one disk.
	Replicas int
}

// DefaultConfig is the configuration with every default: workerid's, on
// the bucket uid_workers with the replicas the server's clustering
// suggests.
func DefaultConfig() Config {
	return Config{
		Config: workerid.DefaultConfig(),
		Bucket: "uid_workers",
	}
}

// WithDefaults is c with every zero setting set to DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.Config = c.Config.WithDefaults()
	c.Bucket = cmp.Or(c.Bucket, d.Bucket)
	c.Replicas = cmp.Or(c.Replicas, d.Replicas)
	return c
}

var bucketPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports the first invalid setting as a *setting.Error,
// zero settings read as their defaults: workerid.Config's, then the
// bucket's.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if !bucketPattern.MatchString(c.Bucket) {
		return &setting.Error{Field: "Bucket", Reason: fmt.Sprintf("%q is not a valid bucket name (letters, digits, _ and -)", c.Bucket)}
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return &setting.Error{Field: "Replicas", Reason: fmt.Sprintf("%d is outside 1..5 (0: 3 in a cluster)", c.Replicas)}
	}
	return nil
}

// KVBucket is the store's bucket: Bucket, or with regions
// Bucket_<region> (uid_workers_east), one per region, so that a
// region's claims, renewals and lanes stay in its own cluster.
func (c Config) KVBucket() string {
	if c.Regions.IsZero() {
		return c.Bucket
	}
	return c.Bucket + "_" + c.Region
}
