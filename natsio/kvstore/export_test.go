package kvstore

import (
	"context"
	"time"
)

// SetLossWait replaces the wait of W before a disposable node key is read
// back: the tests' clock, which lets a test put a loss inside the wait.
func SetLossWait(a *Assigner, wait func(ctx context.Context, w time.Duration) error) {
	a.waitLoss = wait
}
