package testenv

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// RoundOrder is targets in the order this round of scripts/bench-report.sh
// runs them: an even UID_BENCH_ROUND reverses them. Run in a fixed order,
// the last target paid for what the earlier ones left in the process:
// uidclient, always last, came out at 0.86 × the echo with 8 clients in
// one report, and at 0.955 × (the median of four pairs) run alternately
// first and second.
func RoundOrder(targets []string) []string {
	if round, err := strconv.Atoi(os.Getenv("UID_BENCH_ROUND")); err == nil && round%2 == 0 {
		targets = slices.Clone(targets)
		slices.Reverse(targets)
	}
	return targets
}

// MicroEcho adds to nc a micro service answering subject with "ok", as
// `nats bench service serve` does: the limit a request-reply endpoint is
// compared with.
func MicroEcho(tb testing.TB, nc *nats.Conn, subject string) {
	tb.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "bench-echo", Version: "0.0.1", QueueGroup: "bench-echo"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = svc.Stop() })
	ok := []byte("ok")
	echo := micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(ok) })
	if err := svc.AddEndpoint("echo", echo, micro.WithEndpointSubject(subject)); err != nil {
		tb.Fatal(err)
	}
}
