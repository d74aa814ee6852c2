package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/check"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
)

// faultClockEnv is the variable the faultclock build of the dispenser
// reads its offset file from (dispenser/faultclock.go).
const faultClockEnv = "UID_FAULT_CLOCK_FILE"

// dispenser is one dispenser's place: a host and the processes that
// occupy it one after another.
type dispenser struct {
	name      string // d0.., e0.. (the MySQL fleet)
	fleet     string // its subject prefix
	host      *netns.Host
	bin       string
	env       []string
	dir       string
	clockFile string

	onExit func(*proc, error)

	mu       sync.Mutex
	proc     *proc
	started  int
	logs     []check.Log
	clockOff time.Duration
}

func newDispenser(ctx context.Context, network *netns.Network, name, fleet, bin, dir string, env []string, onExit func(*proc, error)) (*dispenser, error) {
	h, err := network.AddHost(ctx, name)
	if err != nil {
		return nil, err
	}
	d := &dispenser{name: name, fleet: fleet, host: h, bin: bin, dir: dir, onExit: onExit,
		clockFile: filepath.Join(dir, "clock-"+name)}
	if err := os.WriteFile(d.clockFile, []byte("0s\n"), 0o600); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	d.env = append(append([]string(nil), env...), faultClockEnv+"="+d.clockFile)
	return d, nil
}

// start starts a new process in the place.
func (d *dispenser) start() error {
	d.mu.Lock()
	d.started++
	name := fmt.Sprintf("%s#%d", d.name, d.started)
	logPath := filepath.Join(d.dir, fmt.Sprintf("dispenser-%s-%d.log", d.name, d.started))
	d.mu.Unlock()
	p, err := startProc(d.host, name, logPath, d.env, d.onExit, d.bin)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.proc = p
	d.logs = append(d.logs, check.Log{Process: name, Path: logPath, Fleet: d.fleet})
	d.mu.Unlock()
	return nil
}

func (d *dispenser) current() *proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.proc
}

// serving tells whether the current process has logged that it serves.
func (d *dispenser) serving() bool {
	p := d.current()
	if p == nil || !p.alive() {
		return false
	}
	b, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(b), `"event":"service.serving"`) ||
		err == nil && strings.Contains(string(b), `"msg":"serving"`)
}

// setClock writes the process's clock offset and waits (up to within)
// until the process shows it read it: the proof that the step happened.
func (d *dispenser) setClock(ctx context.Context, off time.Duration, within time.Duration) (bool, error) {
	_ = os.Remove(d.clockFile + ".seen")
	if err := os.WriteFile(d.clockFile, []byte(off.String()+"\n"), 0o600); err != nil {
		return false, fmt.Errorf("faults: %w", err)
	}
	d.mu.Lock()
	d.clockOff = off
	d.mu.Unlock()
	return d.clockSeen(ctx, off, within)
}

// restartOnClock starts a new process in the place, its clock at the
// offset in force, and waits (up to within) until the new process shows
// it read that offset: the proof that it started on the stepped clock.
// The place's process must be gone.
func (d *dispenser) restartOnClock(ctx context.Context, within time.Duration) (bool, error) {
	d.mu.Lock()
	off := d.clockOff
	d.mu.Unlock()
	// The old process's acknowledgement of the same offset proves nothing
	// of the new one.
	_ = os.Remove(d.clockFile + ".seen")
	if err := d.start(); err != nil {
		return false, err
	}
	return d.clockSeen(ctx, off, within)
}

// clockSeen waits (up to within) until the process writes that it read
// the offset off.
func (d *dispenser) clockSeen(ctx context.Context, off time.Duration, within time.Duration) (bool, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(d.clockFile + ".seen"); err == nil && strings.HasPrefix(string(b), off.String()+" ") {
			return true, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return false, err
		}
	}
	return false, nil
}

// allLogs are the logs of every process the place ran.
func (d *dispenser) allLogs() []check.Log {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]check.Log(nil), d.logs...)
}
