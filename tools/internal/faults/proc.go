package faults

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/procsig"
)

// proc is one OS process the harness runs inside a host: a NATS node, a
// dispenser or a client.
type proc struct {
	name    string // e.g. n1, d0#3, c0
	host    *netns.Host
	pid     int
	logPath string
	exited  chan struct{} // closed when it has exited
	started time.Time

	sig *procsig.Signaled // told to exit, paused

	mu      sync.Mutex
	exitErr error
}

// startProc starts bin with args and env inside host, its output in
// logPath (appended). onExit, when set, is told of an exit the harness
// did not ask for.
func startProc(host *netns.Host, name, logPath string, env []string, onExit func(*proc, error), bin string, args ...string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	cmd := host.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("faults: start %s: %w", name, err)
	}
	p := &proc{name: name, host: host, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{}), started: time.Now(),
		sig: procsig.New(cmd.Process.Pid)}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.exited)
		if !p.sig.ExitAsked() && onExit != nil {
			onExit(p, err)
		}
	}()
	return p, nil
}

func (p *proc) signal(sig syscall.Signal) error {
	if err := p.sig.Signal(sig); err != nil {
		return fmt.Errorf("faults: %s to %s: %w", sig, p.name, err)
	}
	return nil
}

// alive tells whether the process has not exited.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (a paused process too) and waits for it to be gone.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits up to within, then kills it.
func (p *proc) stop(within time.Duration) error {
	if p.isPaused() {
		_ = p.signal(syscall.SIGCONT)
	}
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.exited:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.exitErr != nil {
			return fmt.Errorf("faults: %s exited after SIGTERM: %w (log %s)", p.name, p.exitErr, p.logPath)
		}
		return nil
	case <-t.C:
		p.kill()
		return fmt.Errorf("faults: %s still running %s after SIGTERM: killed (log %s)", p.name, within, p.logPath)
	}
}

func (p *proc) isPaused() bool { return p.sig.Paused() }

// state is the process's state letter from /proc (T: stopped), the proof
// that a pause took.
func (p *proc) state() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return "gone"
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return string(b[i+2])
		}
	}
	return "?"
}
