package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// dispenser foo bar used to start and serve, ignoring its arguments.
func TestUnexpectedArgumentsExit2WithUsage(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	for _, args := range [][]string{{"foo", "bar"}, {"-version", "now"}, {"--", "x"}} {
		cmd := command(t, args, "DISPENSER_NATS_URL="+url)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(cmd.Run())
		if code != 2 || !strings.Contains(stderr.String(), "unexpected argument") ||
			!strings.Contains(stderr.String(), "usage: dispenser") || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", args, code, stdout.String(), stderr.String())
		}
	}
}

// -version prints the version, the commit and the Go version, and the
// same version is what the micro service and the OTel resource announce.
func TestVersionIsTheServiceVersion(t *testing.T) {
	out, err := command(t, []string{"-version"}).Output()
	if code := exitCode(err); code != 0 {
		t.Fatalf("-version: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "dispenser ") || !strings.HasPrefix(lines[1], "commit ") || !strings.HasPrefix(lines[2], runtime.Version()+" ") {
		t.Fatalf("-version printed %q", out)
	}
	version := strings.TrimPrefix(lines[0], "dispenser ")

	url := testenv.NATS(t, nil).ClientURL()
	metrics := "127.0.0.1:" + freePort(t)
	p := startLogged(t, "DISPENSER_NATS_URL="+url, "DISPENSER_METRICS_ADDR="+metrics, "DISPENSER_LOG_FORMAT=json")
	p.waitFor(servingLine)
	defer p.stop(syscall.SIGTERM)

	conn, err := natsconn.Connect(context.Background(), natsconn.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg, err := conn.Request("$SRV.INFO."+protocol.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Version string }
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Version != version {
		t.Fatalf("micro INFO version %q (%v), want %q: %s", info.Version, err, version, msg.Data)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`service_version=%q`, version); !strings.Contains(string(body), want) {
		t.Fatalf("/metrics target_info lacks %s:\n%s", want, grepLines(string(body), "target_info"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
