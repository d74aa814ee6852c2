package sequencetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// MemStore is the reference SegmentStore, in memory: what the suite
// expects of every store, in a dozen lines. It is real (its takes never
// overlap) and runs through the same suite, so the allocator's own tests
// do not need a server.
type MemStore struct {
	mu  sync.Mutex
	max map[string]uint64
	// epoch counts the losses of Forget; since is when the last one was.
	epoch uint64
	since time.Time
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{max: map[string]uint64{}} }

func (m *MemStore) String() string { return "memory store" }

// Take implements sequence.SegmentStore.
func (m *MemStore) Take(_ context.Context, name string, step, floor uint64) (sequence.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.max[name]
	if !ok {
		return sequence.Segment{}, &sequence.UnknownError{Name: name}
	}
	seg := sequence.TakeFrom(cur, floor, step)
	if step > sequence.MaxValue-seg.From {
		return sequence.Segment{}, fmt.Errorf("%w: %q at %d", sequence.ErrExhausted, name, seg.From)
	}
	m.max[name] = seg.To
	return seg, nil
}

// SetCounter puts name's counter at v behind the allocators' back: what a
// store that forgot allocations looks like.
func (m *MemStore) SetCounter(name string, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max[name] = v
}

// Forget puts name's counter at v as a loss no request sees would (a
// JetStream cluster that forgot a write while its clients stayed
// connected): only the epoch tells.
func (m *MemStore) Forget(name string, v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max[name] = v
	m.epoch++
	m.since = time.Now()
}

// Epoch implements sequence.LossWatcher: its age is known once a loss
// happened.
func (m *MemStore) Epoch(context.Context) (sequence.Epoch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sequence.Epoch{N: m.epoch, Age: time.Since(m.since), AgeKnown: !m.since.IsZero()}, nil
}

// GiveBack implements sequence.SegmentStore.
func (m *MemStore) GiveBack(_ context.Context, name string, seg sequence.Segment) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.max[name]; !ok || cur != seg.To {
		return false, nil
	}
	m.max[name] = seg.From
	return true, nil
}

// Declare implements sequence.SegmentStore.
func (m *MemStore) Declare(_ context.Context, name string, first uint64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.max[name]; ok {
		return false, nil
	}
	m.max[name] = first
	return true, nil
}

// List implements sequence.SegmentStore.
func (m *MemStore) List(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for n := range m.max {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}
