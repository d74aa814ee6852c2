package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// benchClaims are a static claim and a lease on the machine's MySQL, for
// comparing the hot-path cost of a lease with that of no lease at all.
func benchClaims(b *testing.B) map[string]uidcore.Claim {
	cfg := mysqlstore.DefaultConfig()
	cfg.DSN = testenv.MySQL(b)
	lease := claimOK(b, newMySQLAssigner(b, cfg), uidcore.DefaultLayout())
	b.Cleanup(func() { lease.Release(context.Background()) })
	return map[string]uidcore.Claim{"static": uidcore.StaticClaim{ID: lease.WorkerID() + 1}, "lease": lease}
}

// BenchmarkUntil: the check every take makes.
func BenchmarkUntil(b *testing.B) {
	for _, name := range []string{"static", "lease"} {
		b.Run(name, func(b *testing.B) {
			c := benchClaims(b)[name]
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Until(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkMySQLClaim: claiming (and releasing) a worker ID, per mode.
func BenchmarkMySQLClaim(b *testing.B) {
	for _, mode := range []workerid.Mode{workerid.ModeLeased, workerid.ModeDisposable} {
		b.Run(string(mode), func(b *testing.B) {
			cfg := mysqlstore.DefaultConfig()
			cfg.DSN = testenv.MySQL(b)
			cfg.Mode = mode
			a := newMySQLAssigner(b, cfg)
			ctx := context.Background()
			for b.Loop() {
				c, err := a.Claim(ctx, uidcore.DefaultLayout())
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
