package kvstore_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// debianNATS is the machine's old nats-server (2.9.10 from Debian), which
// has the compare-and-set bug the rail refuses.
const debianNATS = "/usr/sbin/nats-server"

// cluster runs three nodes of bin and connects to the first once the
// cluster's JetStream answers.
func cluster(t *testing.T, bin, jetstreamConf string) (*nats.Conn, string) {
	t.Helper()
	version := testenv.NATSServerVersion(t, bin)
	nodes := testenv.NATSCluster(t, bin, version, 3, jetstreamConf)
	nc, err := nats.Connect(nodes[0].URL, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the cluster's JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	testenv.WaitFor(t, 10*time.Second, "the other nodes in the client's server list", func() bool { return len(nc.Servers()) >= 3 })
	return nc, version
}

func openKV(t *testing.T, nc *nats.Conn, cfg kvstore.Config) (*kvstore.Assigner, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.Config.StoreStartupDeadline = 20 * time.Second
	if cfg.Logger == nil {
		cfg.Logger = kvQuietLogger()
	}
	return kvstore.NewAssigner(ctx, nc, cfg)
}

func bucketReplicas(t *testing.T, nc *nats.Conn, bucket string) int {
	t.Helper()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), "KV_"+bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	return s.CachedInfo().Config.Replicas
}

// TestReplicatedBucketRefusedOnOldServer: on a real cluster of Debian's
// nats-server 2.9.10, whose clustered streams let two compare-and-sets of
// one key both succeed, a replicated bucket is refused, new (by default,
// 3 replicas in a cluster, or set) or found; one replica is not.
func TestReplicatedBucketRefusedOnOldServer(t *testing.T) {
	version := testenv.NATSServerVersion(t, debianNATS)
	v, err := natsconn.ParseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Less(natsconn.MinReplicatedCAS) {
		t.Skipf("%s is nats-server %s, which has the fix", debianNATS, version)
	}
	nc, _ := cluster(t, debianNATS, "")
	for name, replicas := range map[string]int{"default": 0, "set": 3} {
		cfg := kvstore.Config{Bucket: "refused_" + name, Replicas: replicas}
		_, err := openKV(t, nc, cfg)
		var old *natsconn.OldServerError
		if !errors.As(err, &old) {
			t.Fatalf("%s: NewAssigner on a cluster of nats-server %s: %v; want an *OldServerError", name, version, err)
		}
		if old.Server != v || old.Replicas != 3 || !strings.Contains(err.Error(), "Replicas") || !strings.Contains(err.Error(), "2.9.21") {
			t.Errorf("%s: %v (server %v, %d replicas); want the real server's version %s, 3 replicas, the setting and the fixed release", name, err, old.Server, old.Replicas, version)
		}
		js, _ := jetstream.New(nc)
		if _, err := js.KeyValue(context.Background(), cfg.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("%s: the refused bucket was created anyway (%v)", name, err)
		}
	}
	if _, err := openKV(t, nc, kvstore.Config{Bucket: "single", Replicas: 1}); err != nil {
		t.Fatalf("one replica on nats-server %s: %v", version, err)
	}
	// A bucket made beforehand with 3 replicas is refused whatever the setting.
	js, _ := jetstream.New(nc)
	// Until every node has joined the meta group there are too few peers.
	var lastErr error
	testenv.WaitFor(t, 60*time.Second, "an R3 bucket made by hand", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, lastErr = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "made_by_hand", Replicas: 3})
		return lastErr == nil
	})
	var old *natsconn.OldServerError
	if _, err := openKV(t, nc, kvstore.Config{Bucket: "made_by_hand", Replicas: 1}); !errors.As(err, &old) || old.Replicas != 3 {
		t.Fatalf("an existing R3 bucket on nats-server %s: %v; want an *OldServerError", version, err)
	}
}

// TestNewBucketReplicatedInCluster: on a cluster of go.mod's nats-server a
// new bucket gets 3 replicas unless the setting says otherwise; on a
// single server, 1.
func TestNewBucketReplicatedInCluster(t *testing.T) {
	nc, _ := cluster(t, natsServer215(t), "sync_interval: always")
	if _, err := openKV(t, nc, kvstore.Config{Bucket: "auto"}); err != nil {
		t.Fatal(err)
	}
	if got := bucketReplicas(t, nc, "auto"); got != 3 {
		t.Errorf("a new bucket in a 3-node cluster has %d replicas, want 3", got)
	}
	if _, err := openKV(t, nc, kvstore.Config{Bucket: "set", Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	if got := bucketReplicas(t, nc, "set"); got != 1 {
		t.Errorf("a bucket set to 1 replica has %d", got)
	}
	single := kvConnect(t, embeddedAddr(t))
	if _, err := openKV(t, single, kvstore.Config{Bucket: "alone"}); err != nil {
		t.Fatal(err)
	}
	if got := bucketReplicas(t, single, "alone"); got != 1 {
		t.Errorf("a new bucket on a single server has %d replicas, want 1", got)
	}
}

// natsServer215 is go.mod's nats-server as a binary (go install'd into
// GOPATH/bin, as internal/supercluster finds it).
func natsServer215(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "nats-server")
}

// syncServer is an embedded server whose application account (with
// JetStream) imports the system account's VARZ, so the store can read the
// server's sync setting.
func syncServer(t *testing.T, syncAlways bool) *nats.Conn {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "server.conf")
	body := `accounts {
  SYS { users: [{user: sys, password: sys}], exports: [{service: "$SYS.REQ.SERVER.*.VARZ"}] }
  APP { jetstream: enabled, users: [{user: app, password: app}], imports: [{service: {account: SYS, subject: "$SYS.REQ.SERVER.*.VARZ"}}] }
}
system_account: SYS
no_auth_user: app
`
	if syncAlways {
		body += "jetstream { sync_interval: always }\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	return kvConnect(t, strings.TrimPrefix(testenv.NATS(t, opts).ClientURL(), "nats://"))
}

// TestUnsyncedServer: a server that reports a sync interval gets a warning
// naming sync_interval (or, with StoreDurability=refuse, a refusal); one
// that syncs always gets neither.
func TestUnsyncedServer(t *testing.T) {
	var logs testenv.LogBuffer
	nc := syncServer(t, false)
	if _, err := openKV(t, nc, kvstore.Config{Config: workerid.Config{Logger: logs.Logger(slog.LevelInfo)}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "sync_interval: always") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning about the sync interval in:\n%s", logs.String())
	}
	_, err := openKV(t, nc, kvstore.Config{Config: workerid.Config{StoreDurability: workerid.DurabilityRefuse}})
	var de *workerid.DurabilityError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "sync_interval: always") {
		t.Errorf("StoreDurability=refuse on an unsynced server: %v; want a *DurabilityError naming sync_interval", err)
	}

	synced := syncServer(t, true)
	if _, err := openKV(t, synced, kvstore.Config{Config: workerid.Config{StoreDurability: workerid.DurabilityRefuse}}); err != nil {
		t.Errorf("StoreDurability=refuse on a server with sync_interval: always: %v", err)
	}
}
