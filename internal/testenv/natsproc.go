package testenv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NATSServerBinEnv names a nats-server binary for NATSProcess; without it
// the one on PATH (or /usr/sbin/nats-server) is used. The embedded server
// is go.mod's release; this one is whatever the machine runs (2.9 here),
// so behaviour that differs between releases is tested on both.
const NATSServerBinEnv = "UID_TEST_NATS_SERVER"

// RequireNATSServerEnv, when "1", turns a missing nats-server binary into
// a test failure instead of a skip. .ci/run sets it.
const RequireNATSServerEnv = "UID_REQUIRE_NATS_SERVER"

// NATSProcess starts the machine's nats-server binary as a process of its
// own, with JetStream, on a port it picks itself and a temporary store,
// and stops it when the test ends; it returns its client URL and the
// server's version. Without a binary the test is skipped (or fails, with
// RequireNATSServerEnv).
func NATSProcess(t testing.TB) (url, version string) {
	t.Helper()
	bin := os.Getenv(NATSServerBinEnv)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats-server"); err != nil {
			bin = "/usr/sbin/nats-server"
		}
	}
	version = NATSServerVersion(t, bin)
	dir := t.TempDir()
	p := StartNATSServer(t, bin, version, dir, "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", filepath.Join(dir, "store"))
	return p.URL, version
}

// NATSServerVersion is the version of the nats-server binary bin; a
// missing binary skips the test (or fails it, with RequireNATSServerEnv).
func NATSServerVersion(t testing.TB, bin string) string {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv(RequireNATSServerEnv) == "1" {
			t.Fatalf("testenv: no nats-server binary (%s) and %s=1: %v", NATSServerBinEnv, RequireNATSServerEnv, err)
		}
		t.Skipf("testenv: no nats-server binary (%s): %v", NATSServerBinEnv, err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("testenv: %s --version: %v", bin, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: "))
}

// ServerProcess is a nats-server process started by StartNATSServer.
type ServerProcess struct {
	URL    string // client URL, from the ports file
	cmd    *exec.Cmd
	exited chan struct{}
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (p *ServerProcess) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Signal sends sig to the server (SIGSTOP and SIGCONT freeze and resume
// it).
func (p *ServerProcess) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// StartNATSServer runs bin (of version) with args, a client port of -1
// among them, writing its ports file and log into dir; it waits for the
// client port and kills the server when the test ends, logging its log
// when the test failed.
func StartNATSServer(t testing.TB, bin, version, dir string, args ...string) *ServerProcess {
	t.Helper()
	// Port -1: the server picks a free port and writes it to a ports file,
	// so no other test's server can take it in between.
	cmd := exec.Command(bin, append(args, "--ports_file_dir", dir)...)
	// The server dies with the test binary, even on a timeout's panic.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(dir, "nats-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", bin, err)
	}
	p := &ServerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("nats-server %s (%s) log:\n%s", version, dir, log)
		}
	})
	portsFile := filepath.Join(dir, filepath.Base(bin)+"_"+strconv.Itoa(cmd.Process.Pid)+".ports")
	WaitFor(t, 10*time.Second, "nats-server "+version+" to write its ports file", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("testenv: nats-server %s exited at start (its log follows)", version)
		default:
		}
		var ports struct {
			Nats []string `json:"nats"`
		}
		data, err := os.ReadFile(portsFile)
		if err != nil || json.Unmarshal(data, &ports) != nil || len(ports.Nats) == 0 {
			return false
		}
		p.URL = ports.Nats[0]
		return true
	})
	return p
}
