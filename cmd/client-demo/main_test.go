package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/sequence/sequencetest"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve runs one dispenser service (worker 5) on a fresh embedded server
// and returns the server's URL.
func serve(t *testing.T) string {
	t.Helper()
	url := testenv.NATS(t, nil).ClientURL()
	conn, err := natsconn.Connect(context.Background(), natsconn.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	// The default take wait, as a dispenser has: the load test expects no
	// 503 at all, and a 5 ms wait answered one whenever padding on a
	// loaded machine (the race detector, CI's other packages) fell behind.
	gen, err := uidcore.NewCached(uidcore.CachedOptions{Claim: uidcore.StaticClaim{ID: 5}})
	if err != nil {
		t.Fatal(err)
	}
	seqs := sequencetest.NewAllocator(t, sequencetest.NewMemStore(), sequencetest.Config())
	if err := seqs.Declare(context.Background(), []sequence.Declaration{{Name: "orders", First: 1}}); err != nil {
		t.Fatal(err)
	}
	svc, err := natsio.NewService(conn.Conn, gen, natsio.ServiceConfig{Sequences: seqs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Stop()
		conn.Close()
		gen.Close()
	})
	return url
}

func runWith(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := func(k string) string {
		if k == "NATS_URL" {
			return url
		}
		return ""
	}
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, env)
	return code, stdout.String(), stderr.String()
}

// TestDemoSequence: -seq prints the sequence's numbers, increasing, and
// an undeclared name fails with the service's 404.
func TestDemoSequence(t *testing.T) {
	url := serve(t)
	code, out, errOut := runWith(t, url, "-seq", "orders", "-show", "2")
	if code != 0 || !strings.Contains(out, "uid.seq.orders.next") || !strings.Contains(out, "1\n2\n\nuid.seq.orders.batch 2 (binary):\n3\n4\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runWith(t, url, "-seq", "nosuch")
	if code != 1 || !strings.Contains(errOut, `404 unknown sequence "nosuch"`) {
		t.Fatalf("undeclared: exit %d, %s", code, errOut)
	}
}

func TestDemoPrintsParsedIDs(t *testing.T) {
	url := serve(t)
	code, out, errOut := runWith(t, url, "-show", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := regexp.MustCompile(`(?m)^  (\d+) +time (\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)  worker 5 +sequence (\d+)$`).FindAllStringSubmatch(out, -1)
	if len(lines) != 8 {
		t.Fatalf("want 8 parsed IDs (4 next, 4 batch), got %d:\n%s", len(lines), out)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l[1]] {
			t.Fatalf("ID %s printed twice:\n%s", l[1], out)
		}
		seen[l[1]] = true
		ts, err := time.Parse(time.DateTime+"Z", l[2])
		if err != nil || time.Since(ts) > time.Minute || time.Until(ts) > time.Minute {
			t.Fatalf("time %s is not now: %v", l[2], err)
		}
	}
	if !strings.Contains(out, "uid.next") || !strings.Contains(out, "uid.batch 4 (binary)") {
		t.Fatalf("headings missing:\n%s", out)
	}
}

func TestLoadModeCountsAndChecksUniqueness(t *testing.T) {
	url := serve(t)
	for _, tc := range []struct {
		args []string
		ids  string
	}{
		{[]string{"-load", "-c", "4", "-n", "300"}, "all 300 IDs distinct"},
		{[]string{"-load", "-c", "3", "-n", "30", "-batch", "1000"}, "all 30,000 IDs distinct"},
	} {
		code, out, errOut := runWith(t, url, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", tc.args, code, out, errOut)
		}
		// A loaded machine may let an attempt time out, and the client
		// absorbs it with a retry (counted on the retried line): what the
		// run must not see is an error or a 503, the served generator
		// keeping up with the load.
		for _, want := range []string{tc.ids, "errors      0", "latency     p50 ", " p99 ", "req/s", "IDs/s", "per worker  5: ", " attempts: 0 503s, 0 no responders, "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, want, out)
			}
		}
		if !strings.Contains(errOut, "100%") {
			t.Errorf("%v: no finished progress bar on stderr:\n%s", tc.args, errOut)
		}
	}
	code, out, _ := runWith(t, url, "-load", "-c", "2", "-d", "300ms")
	if code != 0 || !strings.Contains(out, "distinct") {
		t.Fatalf("duration mode: exit %d\n%s", code, out)
	}
}

func TestUnreachableServerExits1(t *testing.T) {
	code, _, errOut := runWith(t, "nats://127.0.0.1:1")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// With no dispenser answering, a load run is no success: exit 1, "no IDs
// received", and the calls the end of the run cut short are counted.
func TestLoadWithNobodyAnsweringExits1(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	code, out, errOut := runWith(t, url, "-load", "-c", "2", "-d", "500ms", "-timeout", "5s")
	if code != 1 || !strings.Contains(out, "no IDs received") || !strings.Contains(out, "in flight   2 calls") {
		t.Fatalf("exit %d; want 1, no IDs received and 2 calls in flight\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "distinct") {
		t.Fatalf("a run of no IDs reports them distinct:\n%s", out)
	}
}

// A stray argument exits 2 with the usage, before anything is connected
// (the URL leads nowhere: a demo run would exit 1), as the dispenser's
// does.
func TestStrayArgumentExits2WithUsage(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stray string
	}{{[]string{"bogus"}, "bogus"}, {[]string{"-show", "2", "bogus"}, "bogus"}, {[]string{"pasre", "123"}, "pasre"}} {
		args := tc.args
		code, stdout, stderr := runWith(t, "nats://127.0.0.1:1", args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("unexpected argument %q", tc.stray)) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
		if !strings.Contains(stderr, "usage: client-demo") {
			t.Errorf("%v: stderr lacks the usage: %q", args, stderr)
		}
	}
}
