package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// serveBlocks publishes ID blocks of worker 6 on a fresh embedded server
// and returns the server's URL.
func serveBlocks(t *testing.T) string {
	t.Helper()
	url := testenv.NATS(t, nil).ClientURL()
	conn, err := natsconn.Connect(context.Background(), natsconn.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: 6}, TakeWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := natsio.NewBlockPublisher(context.Background(), conn.Conn, gen,
		natsio.BlocksConfig{BlockSize: 512, TargetDepth: 8, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pub.Stop(context.Background())
		conn.Close()
		gen.Close()
	})
	return url
}

// blockWait is each request's -timeout in the blocks tests: a take waits
// for a block as long as a loaded machine needs, bounded by the test
// binary's timeout, not 5 s (make test at load 19: 10 of 20 takes of
// 1,000 IDs failed 'context deadline exceeded' while the publisher, its
// blocks redelivered, fell behind).
const blockWait = "10m"

func TestBlocksModeTakesDistinctIDs(t *testing.T) {
	url := serveBlocks(t)
	code, out, errOut := runWith(t, url, "-blocks", "-timeout", blockWait, "-loss-window", "50ms", "-c", "3", "-n", "30", "-batch", "1000")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"blocks: sources 3, stream UID_BLOCKS", "all 30,000 IDs distinct", "errors      0", "per worker  6: 30,000", "source 0    blocks used "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "age         p50 ") {
		t.Errorf("output lacks the age of the IDs taken:\n%s", out)
	}
	code, out, _ = runWith(t, url, "-blocks", "-timeout", blockWait, "-loss-window", "0", "-c", "2", "-d", "300ms", "-batch", "100")
	if code != 0 || !strings.Contains(out, "distinct") {
		t.Fatalf("duration mode: exit %d\n%s", code, out)
	}
	// -keep bounds the IDs kept for the check; all are counted.
	code, out, _ = runWith(t, url, "-blocks", "-timeout", blockWait, "-loss-window", "0", "-c", "2", "-n", "20", "-batch", "1000", "-keep", "5000")
	for _, want := range []string{"IDs         20,000:", "all 5,000 IDs kept distinct (15,000 more not kept: -keep)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("-keep: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	// -keep 0 counts every ID and keeps none: a run that received IDs
	// still succeeds.
	code, out, _ = runWith(t, url, "-blocks", "-timeout", blockWait, "-loss-window", "0", "-c", "2", "-n", "20", "-batch", "1000", "-keep", "0")
	for _, want := range []string{"IDs         20,000:", "not checked: no IDs kept (-keep 0)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("-keep 0: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

// With no dispenser publishing blocks, -blocks says which variable turns
// them on and exits 1.
func TestBlocksWithoutPublisherNamesTheVariable(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	code, out, errOut := runWith(t, url, "-blocks", "-loss-window", "0", "-c", "1", "-d", "300ms")
	if code != 1 || !strings.Contains(out+errOut, "DISPENSER_BLOCKS_ENABLED=true") {
		t.Fatalf("exit %d; want 1 naming DISPENSER_BLOCKS_ENABLED\n%s\n%s", code, out, errOut)
	}
}
