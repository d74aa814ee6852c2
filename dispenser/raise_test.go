package dispenser

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

// TestRaiseSequence: on both stores, -raise-sequence moves a sequence's
// counter up (the next number is the one asked for) and never down, and
// refuses an undeclared name.
func TestRaiseSequence(t *testing.T) {
	for store, dsn := range map[string]func(testing.TB) string{"KV": func(testing.TB) string { return "" }, "MySQL": testenv.MySQL} {
		t.Run(store, func(t *testing.T) {
			cfg := testConfig(testenv.NATS(t, nil).ClientURL(), dsn(t))
			cfg.Sequences = "orders"
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			next := func() uint64 {
				t.Helper()
				d := start(t, cfg)
				n, err := d.Sequences().Next(ctx, "orders")
				if err != nil {
					t.Fatal(err)
				}
				shutdown(t, d)
				return n
			}
			if n := next(); n != 1 {
				t.Fatalf("first number %d, want 1", n)
			}
			before, after, err := RaiseSequence(ctx, cfg, testLogger(), "orders", 1_000_000)
			if err != nil || before > 1_000_000 || after != 1_000_000 {
				t.Fatalf("raise to 1000000: %d -> %d, %v", before, after, err)
			}
			if n := next(); n != 1_000_000 {
				t.Fatalf("first number after the raise %d, want 1000000", n)
			}
			before, after, err = RaiseSequence(ctx, cfg, testLogger(), "orders", 5)
			if err != nil || before != after || after < 1_000_000 {
				t.Fatalf("raise to 5 (below the counter): %d -> %d, %v; want no change", before, after, err)
			}
			if n := next(); n <= 1_000_000 {
				t.Fatalf("a raise below the counter lowered it: next number %d", n)
			}
			if _, _, err := RaiseSequence(ctx, cfg, testLogger(), "nosuch", 10); !errors.Is(err, sequence.ErrUnknownSequence) {
				t.Fatalf("raise of an undeclared sequence: %v, want ErrUnknownSequence", err)
			}
		})
	}
}

func FuzzParseRaise(f *testing.F) {
	for _, s := range []string{"orders=10", "orders=", "=5", "a b=1", "orders=9223372036854775808", "orders=-1", "x=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, to, err := ParseRaise(s)
		if err != nil {
			return
		}
		if sequence.ValidName(name) != nil || to > sequence.MaxValue || !strings.HasPrefix(s, name+"=") {
			t.Fatalf("ParseRaise(%q) = %q, %d: not a valid name and number of the argument", s, name, to)
		}
	})
}
