package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NATSServerBinEnv names a nats-server binary for NATSProcess; without it
// the one on PATH (or /usr/sbin/nats-server) is used. The embedded server
// is go.mod's release; this one is whatever the machine runs (2.9 here),
// so behaviour that differs between releases is tested on both.
const NATSServerBinEnv = "UID_TEST_NATS_SERVER"

// NATSProcess starts the machine's nats-server binary as a process of its
// own, with JetStream, on a free port and a temporary store, and stops it
// when the test ends; it returns its client URL and the server's version.
// Without a binary the test is skipped.
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
		t.Skipf("testenv: no nats-server binary (%s): %v", NATSServerBinEnv, err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("testenv: %s --version: %v", bin, err)
	}
	version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: "))
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-sd", filepath.Join(dir, "store"))
	logFile, err := os.Create(filepath.Join(dir, "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	WaitFor(t, 10*time.Second, "nats-server "+version+" accepting clients on "+addr, func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		return err == nil && strings.HasPrefix(line, "INFO ")
	})
	return "nats://" + addr, version
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
