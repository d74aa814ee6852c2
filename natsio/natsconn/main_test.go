package natsconn

import (
	"testing"

	"go.uber.org/goleak"
)

// Every connection, watcher and embedded server a test starts is gone
// when the package's tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
