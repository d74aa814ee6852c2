package workerid_test

import (
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksNoStoreClient: the lease machinery links neither store's client
// (the MySQL driver is mysqlstore's, nats.go kvstore's), so a program that
// uses one store does not carry the other.
func TestLinksNoStoreClient(t *testing.T) {
	deps := testdeps.Deps(t, "github.com/uid-dispenser/uid-dispenser/workerid")
	for _, pkg := range deps {
		if strings.HasPrefix(pkg, "github.com/go-sql-driver/") || strings.HasPrefix(pkg, "github.com/nats-io/") {
			t.Errorf("workerid links %s", pkg)
		}
	}
	if !strings.Contains(strings.Join(deps, " "), "github.com/uid-dispenser/uid-dispenser/uidcore") {
		t.Errorf("go list -deps misses uidcore: %v", deps)
	}
}
