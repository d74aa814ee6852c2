package dispenser

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

// blocksConfig is a test configuration with ID blocks on (small blocks so
// the stream turns over quickly) and worker IDs leased through KV.
func blocksConfig(url string) Config {
	return withBlocks(testConfig(url, ""))
}

// withBlocks is cfg with blocks on, as blocksConfig.
func withBlocks(cfg Config) Config {
	cfg.BlocksEnabled = true
	cfg.BlockSize = 1024
	cfg.BlocksTargetDepth = 8
	cfg.BlocksPollInterval = 20 * time.Millisecond
	return cfg
}

func blockSource(t *testing.T, url string) *uidclient.BlockSource {
	t.Helper()
	return blockSourceOf(t, url, "")
}

// blockSourceOf is blockSource on the stream given ("": the default).
func blockSourceOf(t *testing.T, url, stream string) *uidclient.BlockSource {
	t.Helper()
	src, err := uidclient.NewBlockSource(testConn(t, url).Conn, uidclient.BlockSourceConfig{Stream: stream, FetchWait: 200 * time.Millisecond, Logger: testLogger(),
		LossWindow: -1}) // the dispensers' W (testConfig): no claims; natsio/uidclient tests them
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// takeBlocks takes n IDs from each source concurrently.
func takeBlocks(t *testing.T, n int, sources ...*uidclient.BlockSource) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var all []uint64
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Go(func() {
			ids := make([]uint64, n)
			got, err := s.NextN(ctx, ids)
			if err != nil {
				t.Errorf("block source: %d IDs, then %v", got, err)
			}
			mu.Lock()
			all = append(all, ids[:got]...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// Dispensers publish blocks while serving requests; a dispenser restarted
// on the same worker ID while its blocks wait in the stream: the old
// blocks are still consumed and nothing collides with its new claim.
func TestBlocksFromDispensersAcrossARestart(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := blocksConfig(url)
	first := start(t, cfg)
	second := start(t, cfg)
	c := client(t, url)
	sources := []*uidclient.BlockSource{blockSource(t, url), blockSource(t, url), blockSource(t, url)}

	// Blocks and requests at the same time.
	var requested []uint64
	served := make(chan struct{})
	go func() { requested = collect(t, c, 4, 400, nil); close(served) }()
	ids := takeBlocks(t, 20_000, sources...)
	<-served
	ids = append(ids, requested...)
	shares := workers(t, ids)
	if shares[first.WorkerID()] == 0 || shares[second.WorkerID()] == 0 {
		t.Fatalf("IDs per worker %v: want both dispensers", shares)
	}

	// Restart the first dispenser while the stream is full of blocks
	// (both publishers topped it up again after the takes).
	restarted := first.WorkerID()
	shutdown(t, first)
	again := start(t, cfg)
	if again.WorkerID() != restarted {
		t.Fatalf("restarted instance got worker %d, want the released %d", again.WorkerID(), restarted)
	}
	served = make(chan struct{})
	go func() { requested = collect(t, c, 4, 400, nil); close(served) }()
	more := takeBlocks(t, 20_000, sources...)
	<-served
	// The new claim issues only seconds after those the previous holder
	// reserved; IDs of the restarted worker from those seconds are the
	// old incarnation's blocks.
	after := again.claim.After()
	old := 0
	for _, id := range append(slices.Clone(more), requested...) {
		p := uidcoretest.MustParse(t, uidcore.DefaultLayout().Parse, id)
		if p.WorkerID == restarted && p.Time.Unix() <= after {
			old++
		}
	}
	if old == 0 {
		t.Fatalf("none of worker %d's blocks from before the restart were consumed", restarted)
	}
	ids = append(append(ids, more...), requested...)
	testenv.CheckDistinct(t, ids)
	t.Logf("%d IDs distinct; %d from the restarted worker's blocks published before the restart", len(ids), old)
}

func TestBlocksSettingsNameTheVariable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BlocksEnabled = true
	cfg.BlockSize = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zero block size takes the default: %v", err)
	}
	cfg.BlockSize = -5
	var ce *ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Var != "DISPENSER_BLOCKS_BLOCK_SIZE" {
		t.Fatalf("negative block size: %v", err)
	}
	t.Setenv("DISPENSER_BLOCKS_ENABLED", "true")
	t.Setenv("DISPENSER_BLOCKS_TARGET_DEPTH", "16")
	loaded, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.BlocksEnabled || loaded.BlocksTargetDepth != 16 || loaded.BlockSize != protocol.DefaultBlockSize || loaded.BlocksStream != protocol.DefaultBlocksStream {
		t.Fatalf("loaded %+v", loaded.BlocksConfig)
	}
}
