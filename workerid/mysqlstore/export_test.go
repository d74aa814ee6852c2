package mysqlstore

import (
	"context"
	"time"

	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// SetLossWait replaces the wait of W before a disposable row is read
// back: the tests' clock, which lets a test put a loss inside the wait.
func SetLossWait(a *Assigner, wait func(ctx context.Context, w time.Duration) error) {
	a.waitLoss = wait
}

// SetServerIdentity replaces the SQL expression naming the server that
// answers a sequence store s (@@server_id): a test's failover changes
// what it reads instead of the shared server's server_id.
func SetServerIdentity(s sequence.SegmentStore, expr string) {
	s.(*SequenceStore).identity = expr
}
