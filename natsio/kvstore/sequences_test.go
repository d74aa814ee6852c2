package kvstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/natsio/kvstore"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

func kvSequenceStore(addr, bucket string) sequencetest.Store {
	return sequencetest.Store{Addr: addr, New: func(t testing.TB, via string) sequence.SegmentStore {
		cfg := kvConfig(workerid.ModeLeased)
		cfg.Bucket = bucket
		s, _ := newKVAssigner(t, cfg, via).Sequences(context.Background())
		return s
	}, SetCounter: func(t testing.TB, name string, v uint64) {
		if _, err := kvBucket(t, addr, bucket).Put(context.Background(), "seq."+name, []byte(strconv.FormatUint(v, 10))); err != nil {
			t.Fatalf("put seq.%s back to %d: %v", name, v, err)
		}
	}}
}

// TestKVSequenceConformance runs the sequence suite on an embedded
// nats-server, each test with a server of its own.
func TestKVSequenceConformance(t *testing.T) {
	sequencetest.Run(t, func(t *testing.T) sequencetest.Store { return kvSequenceStore(embeddedAddr(t), "uid_workers") })
}

// TestKVSequenceConformanceNATS29 runs it on the machine's nats-server
// (2.9), each test in a bucket of its own.
func TestKVSequenceConformanceNATS29(t *testing.T) {
	addr := machineNATS(t)
	sequencetest.Run(t, func(t *testing.T) sequencetest.Store { return kvSequenceStore(addr, tempBucket(t, addr)) })
}

// TestKVSequenceDeletedKeyNotRedeclared: a sequence key deleted by hand
// is not declared again from its first number (that would hand out its
// numbers a second time); the error says what to do.
func TestKVSequenceDeletedKeyNotRedeclared(t *testing.T) {
	addr := embeddedAddr(t)
	ctx := context.Background()
	s, _ := newKVAssigner(t, kvConfig(workerid.ModeLeased), addr).Sequences(ctx)
	if created, err := s.Declare(ctx, "orders", 1); err != nil || !created {
		t.Fatalf("Declare: %v, %v", created, err)
	}
	if _, err := s.Take(ctx, "orders", 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := kvBucket(t, addr, kvstore.DefaultConfig().Bucket).Delete(ctx, "seq.orders"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Declare(ctx, "orders", 1)
	if err == nil || !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("Declare of a deleted sequence: %v, want a refusal", err)
	}
}
