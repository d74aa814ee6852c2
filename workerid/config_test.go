package workerid_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// dispenserConfig embeds Config anonymously, as the dispenser does.
type dispenserConfig struct {
	workerid.Config
	Subject string `envconfig:"SUBJECT" default:"uid"`
}

var workerEnv = []string{"MYSQL_DSN", "WORKER_MODE", "LEASE_TTL", "RESERVE_CHUNK", "WORKER_NODE_TABLE",
	"WORKER_LEASE_TABLE", "CREATE_TABLES", "WORKER_KV_BUCKET", "WORKER_KV_REPLICAS", "STORE_STARTUP_DEADLINE"}

func clearWorkerEnv(t *testing.T) {
	for _, v := range workerEnv {
		t.Setenv("DISPENSER_"+v, "")
		os.Unsetenv("DISPENSER_" + v)
	}
}

func TestConfigDefaultsAreTheTags(t *testing.T) {
	clearWorkerEnv(t)
	var c dispenserConfig
	if err := envconfig.Process("DISPENSER", &c); err != nil {
		t.Fatal(err)
	}
	if c.Config != workerid.DefaultConfig() {
		t.Errorf("envconfig defaults %+v differ from DefaultConfig %+v", c.Config, workerid.DefaultConfig())
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if c.WorkerMode != workerid.ModeLeased || c.MySQLDSN != "" {
		t.Errorf("default mode %q, DSN %q", c.WorkerMode, c.MySQLDSN)
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	clearWorkerEnv(t)
	t.Setenv("DISPENSER_MYSQL_DSN", "u:p@tcp(db:3306)/uids")
	t.Setenv("DISPENSER_WORKER_MODE", "disposable")
	t.Setenv("DISPENSER_LEASE_TTL", "45s")
	t.Setenv("DISPENSER_RESERVE_CHUNK", "2m")
	t.Setenv("DISPENSER_WORKER_NODE_TABLE", "NODES")
	t.Setenv("DISPENSER_WORKER_LEASE_TABLE", "LEASES")
	t.Setenv("DISPENSER_CREATE_TABLES", "false")
	t.Setenv("DISPENSER_FLEET_TABLE", "FLEET")
	t.Setenv("DISPENSER_SEQUENCE_TABLE", "SEQS")
	t.Setenv("DISPENSER_WORKER_KV_BUCKET", "ids")
	t.Setenv("DISPENSER_WORKER_KV_REPLICAS", "3")
	t.Setenv("DISPENSER_STORE_STARTUP_DEADLINE", "5s")
	var c dispenserConfig
	if err := envconfig.Process("DISPENSER", &c); err != nil {
		t.Fatal(err)
	}
	want := workerid.Config{MySQLDSN: "u:p@tcp(db:3306)/uids", WorkerMode: workerid.ModeDisposable, LeaseTTL: 45 * time.Second,
		ReserveChunk: 2 * time.Minute, WorkerNodeTable: "NODES", WorkerLeaseTable: "LEASES", CreateTables: false,
		FleetTable: "FLEET", SequenceTable: "SEQS", WorkerKVBucket: "ids", WorkerKVReplicas: 3, StoreStartupDeadline: 5 * time.Second}
	if c.Config != want {
		t.Errorf("got %+v\nwant %+v", c.Config, want)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestConfigValidateNamesTheVariable(t *testing.T) {
	cases := []struct {
		set     func(*workerid.Config)
		envVar  string
		mention string
	}{
		{func(c *workerid.Config) { c.WorkerMode = "sticky" }, "DISPENSER_WORKER_MODE", "sticky"},
		{func(c *workerid.Config) { c.LeaseTTL = 500 * time.Millisecond }, "DISPENSER_LEASE_TTL", "500ms"},
		{func(c *workerid.Config) { c.ReserveChunk = 0 }, "DISPENSER_RESERVE_CHUNK", "0s"},
		{func(c *workerid.Config) { c.WorkerNodeTable = "WORKER_NODE; DROP TABLE x" }, "DISPENSER_WORKER_NODE_TABLE", "identifier"},
		{func(c *workerid.Config) { c.WorkerLeaseTable = "1lease" }, "DISPENSER_WORKER_LEASE_TABLE", "identifier"},
		{func(c *workerid.Config) { c.WorkerLeaseTable = "worker_node" }, "DISPENSER_WORKER_LEASE_TABLE", "worker-node table"},
		{func(c *workerid.Config) { c.WorkerKVBucket = "a.b" }, "DISPENSER_WORKER_KV_BUCKET", "a.b"},
		{func(c *workerid.Config) { c.StoreStartupDeadline = -time.Second }, "DISPENSER_STORE_STARTUP_DEADLINE", "negative"},
	}
	for _, tc := range cases {
		c := workerid.DefaultConfig()
		tc.set(&c)
		err := c.Validate()
		var ce *workerid.ConfigError
		if !errors.As(err, &ce) || ce.Var != tc.envVar {
			t.Errorf("%s: err = %v, want a ConfigError naming it", tc.envVar, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) || !strings.Contains(err.Error(), tc.envVar) {
			t.Errorf("%s: %q does not mention %q", tc.envVar, err, tc.mention)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error shows the password: %v", tc.envVar, err)
		}
	}
}
