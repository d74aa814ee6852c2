package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
)

// servingLine is what the JSON log line of an instance that serves holds.
const servingLine = `"` + event.Key + `":"` + event.Serving + `"`

// The test binary doubles as the dispenser: run as a child with
// UID_TEST_RUN_DISPENSER=1 it executes main's run.
func TestMain(m *testing.M) {
	if os.Getenv("UID_TEST_RUN_DISPENSER") == "1" {
		os.Exit(run())
	}
	goleak.VerifyTestMain(m)
}

// command prepares the dispenser as a child process with env on top of
// an environment free of DISPENSER_ variables.
func command(t *testing.T, args []string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISPENSER_") && !strings.HasPrefix(kv, "NATS_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "UID_TEST_RUN_DISPENSER=1")
	// The tests' servers are never power-cut: nothing they acknowledged is
	// lost, and with the default loss window (2m) every start would wait
	// that long before serving. A test may set it again (the last value
	// wins).
	cmd.Env = append(cmd.Env, "DISPENSER_STORE_LOSS_WINDOW=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestHelpListsTheVariables(t *testing.T) {
	out, err := command(t, []string{"-h"}).Output()
	if exitCode(err) != 0 {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"DISPENSER_NATS_URL", "DISPENSER_MYSQL_DSN", "DISPENSER_MAX_BATCH (Integer, default 100000)", "DISPENSER_QUEUE_GROUP (String, default uid-dispenser)"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("-h output lacks %q:\n%s", want, out)
		}
	}
}

func TestInvalidConfigurationExits2NamingTheVariable(t *testing.T) {
	var stderr bytes.Buffer
	cmd := command(t, nil, "DISPENSER_SEQ_BITS=lots")
	cmd.Stderr = &stderr
	if code := exitCode(cmd.Run()); code != 2 || !strings.Contains(stderr.String(), "DISPENSER_SEQ_BITS") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestUnreachableNATSExits1Fast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	var stderr bytes.Buffer
	cmd := command(t, nil, "DISPENSER_NATS_URL="+url, "DISPENSER_NATS_CONNECT_TIMEOUT=1s")
	cmd.Stderr = &stderr
	// Fast means at the connect timeout rather than never: the 30 s is a
	// safety net for a process that keeps retrying, not a bound on speed
	// (a loaded machine starts the binary slowly); that start-up gives up
	// at the timeout is dispenser's TestStartGivesUpOnNATSAtTheConnectTimeout.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 1 || !strings.Contains(stderr.String(), url) || !strings.Contains(stderr.String(), "attempts in") {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
		t.Log(strings.TrimSpace(stderr.String()))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30s after start with a 1s connect timeout; stderr %q", stderr.String())
	}
}

func TestSignalStopsGracefullyWithExit0(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			url := testenv.NATS(t, nil).ClientURL()
			p := startLogged(t, "DISPENSER_NATS_URL="+url, "DISPENSER_LOG_FORMAT=json")
			cmd, lines, log, waitFor := p.cmd, p.lines, &p.log, p.waitFor
			waitFor(servingLine)

			conn, err := natsconn.Connect(context.Background(), natsconn.Config{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := uidclient.New(conn.Conn, uidclient.Config{}).Next(ctx); err != nil {
				t.Fatal(err)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitFor(`"msg":"stopped"`)
			for l := range lines {
				log.WriteString(l + "\n")
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if code := exitCode(err); code != 0 {
					t.Fatalf("exit %d after %s; log:\n%s", code, sig, log.String())
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 60s after %s", sig)
			}
			if !strings.Contains(log.String(), `"`+event.Key+`":"`+event.LeaseReleased+`"`) {
				t.Errorf("the worker ID was not released; log:\n%s", log.String())
			}
		})
	}
}

// loggedProcess is the dispenser binary running with its stderr read
// line by line.
type loggedProcess struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	log   strings.Builder // the lines read so far
}

// startLogged starts the dispenser with env; it is killed at the end of
// the test if still running.
func startLogged(t *testing.T, env ...string) *loggedProcess {
	t.Helper()
	p := &loggedProcess{t: t, cmd: command(t, nil, env...), lines: make(chan string, 100)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	return p
}

// waitFor reads the log until a line contains what, failing the test
// after 60 s (a safety net: a loaded machine starts and stops the binary
// slowly) or when the process ends first.
func (p *loggedProcess) waitFor(what string) {
	p.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("dispenser ended before %q; log:\n%s", what, p.log.String())
			}
			p.log.WriteString(l + "\n")
			if strings.Contains(l, what) {
				return
			}
		case <-timeout:
			_ = p.cmd.Process.Kill()
			p.t.Fatalf("no %q within 60s; log:\n%s", what, p.log.String())
		}
	}
}

// stop sends sig, reads the rest of the log and waits for the exit code.
func (p *loggedProcess) stop(sig syscall.Signal) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	for l := range p.lines {
		p.log.WriteString(l + "\n")
	}
	return exitCode(p.cmd.Wait())
}

// An unknown DISPENSER_* variable is warned about at start, naming the
// closest known one; with a configuration error too, since a misspelling
// may be its cause.
func TestUnknownVariablesAreWarnedAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	var stderr bytes.Buffer
	cmd := command(t, nil, "DISPENSER_NATS_URL="+url, "DISPENSER_NATS_CONNECT_TIMEOUT=1s", "DISPENSER_MAXLANES=4", "DISPENSER_FOO=1")
	cmd.Stderr = &stderr
	if code := exitCode(cmd.Run()); code != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{`msg="unknown variable ignored: did you mean DISPENSER_MAX_LANES?" variable=DISPENSER_MAXLANES`, "variable=DISPENSER_FOO"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	stderr.Reset()
	cmd = command(t, nil, "DISPENSER_MAXLANES=4", "DISPENSER_MAX_LANES=0")
	cmd.Stderr = &stderr
	if code := exitCode(cmd.Run()); code != 2 || !strings.Contains(stderr.String(), "DISPENSER_MAXLANES is not a dispenser setting and is ignored; did you mean DISPENSER_MAX_LANES?") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
