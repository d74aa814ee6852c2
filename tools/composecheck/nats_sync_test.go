package composecheck

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSServersSyncEveryWrite: every NATS configuration the Compose
// files run, read by nats-server's own parser, fsyncs each JetStream write
// before acknowledging it (docs/operations.md, "What the guarantees
// assume"): the default (every 2 minutes) lets a power loss forget leases
// and segments already acknowledged.
func TestNATSServersSyncEveryWrite(t *testing.T) {
	t.Chdir(composeDir)
	t.Setenv("NATS_NAME", "check")
	for _, conf := range []string{"nats/nats.conf", "nats/east.conf", "nats/west.conf"} {
		opts, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Errorf("%s: %v", conf, err)
			continue
		}
		if !opts.JetStream || !opts.SyncAlways {
			t.Errorf("%s: JetStream %v, sync always %v (sync interval %s); want jetstream { sync_interval: always }", conf, opts.JetStream, opts.SyncAlways, opts.SyncInterval)
		}
	}
}
