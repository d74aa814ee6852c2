// Package procsig keeps what a harness must know of a process it signals:
// whether it told the process to exit, so that an exit it asked for is
// told apart from a crash, and whether it paused it, so that it continues
// it before it stops it. The fault harness (internal/faults) and the soak
// (internal/soak) share it.
package procsig

import (
	"sync/atomic"
	"syscall"
)

// Signaled is a process a harness sends signals to.
type Signaled struct {
	pid       int
	exitAsked atomic.Bool
	paused    atomic.Bool
}

// New is the process pid, neither told to exit nor paused.
func New(pid int) *Signaled { return &Signaled{pid: pid} }

// Signal records what sig means to the harness, before the process can
// act on it (SIGKILL and SIGTERM ask it to exit, SIGSTOP pauses it,
// SIGCONT continues it), then sends it.
func (s *Signaled) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM:
		s.exitAsked.Store(true)
	case syscall.SIGSTOP:
		s.paused.Store(true)
	case syscall.SIGCONT:
		s.paused.Store(false)
	}
	return syscall.Kill(s.pid, sig)
}

// ExitAsked says whether the harness told the process to exit.
func (s *Signaled) ExitAsked() bool { return s.exitAsked.Load() }

// Paused says whether the harness paused the process and has not
// continued it.
func (s *Signaled) Paused() bool { return s.paused.Load() }
