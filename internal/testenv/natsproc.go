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
	version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: "))
	dir := t.TempDir()
	// Port -1: the server picks a free port and writes it to a ports file,
	// so no other test's server can take it in between.
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", filepath.Join(dir, "store"), "--ports_file_dir", dir)
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
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("nats-server %s log:\n%s", version, log)
		}
	})
	portsFile := filepath.Join(dir, filepath.Base(bin)+"_"+strconv.Itoa(cmd.Process.Pid)+".ports")
	WaitFor(t, 10*time.Second, "nats-server "+version+" to write its ports file", func() bool {
		select {
		case <-exited:
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
		url = ports.Nats[0]
		return true
	})
	return url, version
}
