package procsig

import (
	"os/exec"
	"syscall"
	"testing"
)

// Signaled records each signal's meaning and sends it: a paused process
// is stopped until continued, a SIGTERM is an exit asked for, and a
// process that is gone is an error.
func TestSignaled(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	s := New(cmd.Process.Pid)
	if s.Paused() || s.ExitAsked() {
		t.Fatal("a new process is neither paused nor told to exit")
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil || !s.Paused() {
		t.Fatalf("SIGSTOP: %v, paused %v", err, s.Paused())
	}
	if err := s.Signal(syscall.SIGCONT); err != nil || s.Paused() {
		t.Fatalf("SIGCONT: %v, paused %v", err, s.Paused())
	}
	if err := s.Signal(syscall.SIGTERM); err != nil || !s.ExitAsked() {
		t.Fatalf("SIGTERM: %v, exit asked %v", err, s.ExitAsked())
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the process ended with %v, want killed by SIGTERM", err)
	}
	if err := s.Signal(syscall.SIGKILL); err == nil {
		t.Fatal("a signal to a process that is gone: no error")
	}
}
