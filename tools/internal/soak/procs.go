package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uid-dispenser/uid-dispenser/telemetry/event"
	"github.com/uid-dispenser/uid-dispenser/tools/internal/procsig"
)

// dispenserSlot is one of the dispensers: a place in a fleet and the
// cluster (its NATS node, its metrics port) that successive processes
// occupy.
type dispenserSlot struct {
	index   int
	label   string // d0..d2 (MySQL fleet), k0, k1 (KV fleet)
	fleet   *fleet
	region  string // its DISPENSER_REGION (regions mode; "" otherwise)
	bin     string
	env     []string
	logDir  string
	metrics string // host:port of its /metrics
	events  *events

	mu       sync.Mutex
	proc     *dispenserProc
	started  int // processes started in this slot
	finished []*dispenserProc
}

// dispenserProc is one OS process of the dispenser binary.
type dispenserProc struct {
	slot    *dispenserSlot
	name    string // slot and process number, e.g. "d1#3", "k0#2"
	cmd     *exec.Cmd
	pid     int
	start   time.Time
	logPath string

	serving chan struct{} // closed at its first "serving" log line
	exited  chan struct{} // closed when the process has exited
	exitErr error
	logDone chan struct{}     // closed when its log is read to the end
	sig     *procsig.Signaled // told to exit by the soak, paused

	mu       sync.Mutex
	workerID int64          // -1 until serving
	holds    map[int64]bool // worker IDs it holds leases on (its lanes), from its log
	expiries int            // leases it saw expire unrenewed, from its log
	samples  []sample
	end      time.Time
}

// events collects what the dispensers' logs tell: claims and problems.
type events struct {
	mu         sync.Mutex
	afters     map[string]map[uint64][]int64 // fleet → worker ID → "after" of each claim logged
	violations []string
	logErrors  map[string]int // ERROR log messages of the dispensers, by message
}

func newEvents() *events {
	afters := map[string]map[uint64][]int64{}
	for _, f := range fleets {
		afters[f.name] = map[uint64][]int64{}
	}
	return &events{afters: afters, logErrors: map[string]int{}}
}

func (e *events) violation(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.violations = append(e.violations, fmt.Sprintf(format, args...))
}

// start starts a new process in the slot. It does not wait for it to
// serve.
func (s *dispenserSlot) start() (*dispenserProc, error) {
	s.mu.Lock()
	s.started++
	name := fmt.Sprintf("%s#%d", s.label, s.started)
	s.mu.Unlock()
	logPath := filepath.Join(s.logDir, fmt.Sprintf("dispenser-%s-%d.log", s.label, s.started))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	cmd := exec.Command(s.bin)
	cmd.Env = s.env
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	// Its own process group, so that a Ctrl-C of the soak does not reach it
	// before the soak stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("soak: start dispenser %s: %w", name, err)
	}
	p := &dispenserProc{
		slot: s, name: name, cmd: cmd, pid: cmd.Process.Pid, start: time.Now(), logPath: logPath,
		serving: make(chan struct{}), exited: make(chan struct{}), logDone: make(chan struct{}), workerID: -1,
		holds: map[int64]bool{}, sig: procsig.New(cmd.Process.Pid),
	}
	go p.readLog(pr, logFile)
	go func() {
		err := cmd.Wait()
		pw.Close()
		p.mu.Lock()
		p.exitErr = err
		p.end = time.Now()
		p.mu.Unlock()
		close(p.exited)
		if !p.sig.ExitAsked() {
			s.events.violation("dispenser %s (pid %d) exited without being told to: %v (log %s)", name, p.pid, err, logPath)
		}
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return p, nil
}

// current is the slot's process (nil between a stop and a start).
func (s *dispenserSlot) current() *dispenserProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// retire records the slot's current process as finished.
func (s *dispenserSlot) retire(p *dispenserProc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == p {
		s.proc = nil
	}
	s.finished = append(s.finished, p)
}

// processes are all processes the slot ran, the current one last.
func (s *dispenserSlot) processes() []*dispenserProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]*dispenserProc(nil), s.finished...)
	if s.proc != nil {
		out = append(out, s.proc)
	}
	return out
}

// readLog copies the process's output to its log file and reads the
// events the soak needs from its JSON lines.
func (p *dispenserProc) readLog(r io.Reader, f *os.File) {
	defer close(p.logDone)
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		w.Write(line)
		w.WriteByte('\n')
		p.handleLine(line)
	}
	_, _ = io.Copy(io.Discard, r) // a line beyond the buffer: keep the pipe flowing
}

// logLine is what the soak reads of the dispenser's JSON log lines: the
// lifecycle events (package event) and the level and message of errors.
type logLine struct {
	Level    string `json:"level"`
	Msg      string `json:"msg"`
	Event    string `json:"event"`
	WorkerID *int64 `json:"worker_id"`
	After    *int64 `json:"after"`
}

func (p *dispenserProc) handleLine(line []byte) {
	ev := p.slot.events
	if len(line) == 0 || line[0] != '{' {
		// Not slog's: the Go runtime (panic, fatal error, race report).
		s := string(line)
		if strings.HasPrefix(s, "panic:") || strings.HasPrefix(s, "fatal error:") || strings.Contains(s, "DATA RACE") {
			ev.violation("dispenser %s (pid %d): %s (log %s)", p.name, p.pid, s, p.logPath)
		}
		return
	}
	var l logLine
	if err := json.Unmarshal(line, &l); err != nil {
		return
	}
	if l.WorkerID != nil {
		switch l.Event {
		case event.LeaseAcquired:
			p.mu.Lock()
			p.holds[*l.WorkerID] = true
			p.mu.Unlock()
		// A lane given back stops issuing even when its release does not
		// reach the store (a partition): the lease then expires there.
		case event.LeaseReleased, event.LaneReturned, event.LeaseLost:
			p.mu.Lock()
			delete(p.holds, *l.WorkerID)
			p.mu.Unlock()
		case event.LeaseExpired:
			p.mu.Lock()
			p.expiries++
			p.mu.Unlock()
		}
	}
	switch {
	case l.Event == event.LeaseAcquired && l.WorkerID != nil && l.After != nil:
		ev.mu.Lock()
		w := uint64(*l.WorkerID)
		afters := ev.afters[p.slot.fleet.name]
		afters[w] = append(afters[w], *l.After)
		ev.mu.Unlock()
	case (l.Event == event.Serving || l.Event == event.WorkerChanged) && l.WorkerID != nil:
		p.mu.Lock()
		first := p.workerID < 0
		p.workerID = *l.WorkerID
		p.mu.Unlock()
		if first {
			close(p.serving)
		}
	}
	if l.Level == "ERROR" {
		ev.mu.Lock()
		ev.logErrors[l.Msg]++
		ev.mu.Unlock()
	}
}

// WorkerID is the worker ID the process serves under (-1 before it
// serves).
func (p *dispenserProc) WorkerID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workerID
}

// Expiries counts the leases the process saw expire unrenewed.
func (p *dispenserProc) Expiries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expiries
}

// Holds tells whether the process holds a lease on worker ID w (as one
// of its lanes), as far as its log says.
func (p *dispenserProc) Holds(w int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holds[w]
}

// waitServing waits until the process serves, failing when it exits
// first or within does not suffice.
func (p *dispenserProc) waitServing(ctx context.Context, within time.Duration) error {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.serving:
		return nil
	case <-p.exited:
		return fmt.Errorf("dispenser %s exited before serving: %v (log %s)", p.name, p.exitErr, p.logPath)
	case <-t.C:
		return fmt.Errorf("dispenser %s not serving %s after its start (log %s)", p.name, within, p.logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *dispenserProc) signal(sig syscall.Signal) error {
	if err := p.sig.Signal(sig); err != nil {
		return fmt.Errorf("soak: %s to dispenser %s: %w", sig, p.name, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *dispenserProc) kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.exited
	<-p.logDone
	p.slot.retire(p)
}

// terminate sends SIGTERM and waits up to within for the process to exit;
// it must exit 0. When it does not exit in time it is killed.
func (p *dispenserProc) terminate(within time.Duration) error {
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(within)
	defer t.Stop()
	var err error
	select {
	case <-p.exited:
		if p.exitErr != nil {
			err = fmt.Errorf("dispenser %s did not exit cleanly after SIGTERM: %v (log %s)", p.name, p.exitErr, p.logPath)
		}
	case <-t.C:
		err = fmt.Errorf("dispenser %s still running %s after SIGTERM; killed (log %s)", p.name, within, p.logPath)
		_ = p.signal(syscall.SIGKILL)
		<-p.exited
	}
	<-p.logDone
	p.slot.retire(p)
	return err
}

func (p *dispenserProc) isPaused() bool { return p.sig.Paused() }

func (p *dispenserProc) addSample(s sample) {
	p.mu.Lock()
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

func (p *dispenserProc) history() (samples []sample, lived time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	end := p.end
	if end.IsZero() {
		end = time.Now()
	}
	return append([]sample(nil), p.samples...), end.Sub(p.start)
}
