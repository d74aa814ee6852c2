package soak

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// errNoMariaDB means the machine has no mariadbd (or mysqld) to start:
// the soak then uses the server Config.MySQLDSN names.
var errNoMariaDB = errors.New("soak: no mariadbd installed")

// mysqld is the soak's own MariaDB server: a process with its own data
// directory, port, socket and pid file under the work directory, started
// with --no-defaults so that no my.cnf of the machine leaks in, root with
// an empty password over TCP. It can be killed and restarted on the same
// data directory, and paused, as a fault.
type mysqld struct {
	bin     string
	dir     string // data directory, socket, pid file and error log under it
	port    int
	log     *slog.Logger
	onCrash func(msg string) // an exit the soak did not ask for

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	expected bool // the current process was told to exit
	ready    bool // the current process accepted a login
	paused   bool
}

// findMariaDB returns the paths of mariadbd and of the script that
// initialises a data directory, or errNoMariaDB.
func findMariaDB() (server, installDB string, err error) {
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		return ""
	}
	// /usr/sbin is not on every PATH (a non-root shell's, CI's).
	server = look("mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld")
	installDB = look("mariadb-install-db", "mysql_install_db")
	if server == "" || installDB == "" {
		return "", "", errNoMariaDB
	}
	return server, installDB, nil
}

// startMySQLd initialises a data directory under dir, starts mariadbd on
// a free loopback port and waits until it accepts a root login.
func startMySQLd(ctx context.Context, dir string, log *slog.Logger, onCrash func(string)) (*mysqld, error) {
	bin, installDB, err := findMariaDB()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	m := &mysqld{bin: bin, dir: dir, port: ports[0], log: log, onCrash: onCrash}
	// The options that size the files must be the same at install and at
	// every start. Small logs and buffer pool: the soak's tables are tiny.
	install := exec.CommandContext(ctx, installDB, append([]string{"--no-defaults",
		"--datadir=" + m.dataDir(), "--auth-root-authentication-method=normal", "--skip-test-db", logFileSize}, m.userArgs()...)...)
	if out, err := install.CombinedOutput(); err != nil {
		_ = os.WriteFile(filepath.Join(dir, "install.log"), out, 0o640)
		return nil, fmt.Errorf("soak: %s failed: %w (output in %s)", filepath.Base(installDB), err, filepath.Join(dir, "install.log"))
	}
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// logFileSize keeps the redo log small (the default is 96 MiB, written
// out at install: seconds on a loaded machine).
const logFileSize = "--innodb-log-file-size=16M"

func (m *mysqld) dataDir() string { return filepath.Join(m.dir, "data") }

// ErrorLog is the path of mariadbd's error log (appended to by every
// start).
func (m *mysqld) ErrorLog() string { return filepath.Join(m.dir, "error.log") }

// userArgs: mariadbd refuses to run as root unless told so.
func (m *mysqld) userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// DSN is root's go-sql-driver DSN for the server, with no database.
func (m *mysqld) DSN() string {
	return "root@tcp(" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) + ")/"
}

// start starts mariadbd on the data directory and waits until it accepts
// a login (30 s at most: crash recovery after a SIGKILL of a small data
// directory takes well under a second here).
func (m *mysqld) start(ctx context.Context) error {
	args := append([]string{"--no-defaults",
		"--datadir=" + m.dataDir(),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(m.port),
		"--socket=" + filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(m.dir, "mysqld.pid"),
		"--log-error=" + m.ErrorLog(),
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=64M", logFileSize,
		// Durable commits (the default, stated): a SIGKILL must lose no
		// acknowledged lease or segment, or the checks would blame the
		// dispensers for the server.
		"--innodb-flush-log-at-trx-commit=1",
	}, m.userArgs()...)
	cmd := exec.Command(m.bin, args...)
	// Its own process group, so that a Ctrl-C of the soak does not stop
	// it before the dispensers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.OpenFile(filepath.Join(m.dir, "mysqld.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("soak: start mariadbd: %w", err)
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited, m.expected, m.ready, m.paused = cmd, exited, false, false, false
	m.mu.Unlock()
	go func() {
		err := cmd.Wait()
		out.Close()
		m.mu.Lock()
		crashed := m.ready && !m.expected // an exit while starting is start's error
		m.mu.Unlock()
		close(exited)
		if crashed && m.onCrash != nil {
			m.onCrash(fmt.Sprintf("mariadbd (pid %d) exited without being told to: %v (log %s)", cmd.Process.Pid, err, m.ErrorLog()))
		}
	}()
	m.log.Info("mariadbd started", "pid", cmd.Process.Pid, "port", m.port)
	if err := m.waitReady(ctx, exited, 30*time.Second); err != nil {
		_ = m.signal(syscall.SIGKILL) // one that never answered goes
		<-exited
		return err
	}
	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
	select {
	case <-exited: // between its first login and now: not reported as a crash
		return fmt.Errorf("soak: %w (log %s)", errExitedStarting, m.ErrorLog())
	default:
		return nil
	}
}

// waitReady pings the server until a root login works.
func (m *mysqld) waitReady(ctx context.Context, exited chan struct{}, within time.Duration) error {
	db, err := sql.Open("mysql", m.DSN()+"?timeout=1s")
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if err = db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("soak: %w (log %s)", errExitedStarting, m.ErrorLog())
		case <-ctx.Done():
			return fmt.Errorf("soak: mariadbd not accepting logins %s after its start: %v (log %s)", within, err, m.ErrorLog())
		case <-t.C:
		}
	}
}

// signal sends sig to the current process.
func (m *mysqld) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return errors.New("soak: mariadbd is not running")
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		m.expected = true // before the exit can be seen
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("soak: %s to mariadbd: %w", sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		m.paused = true
	case syscall.SIGCONT:
		m.paused = false
	}
	return nil
}

// killAndRestart SIGKILLs the server, keeps it down for down and starts
// it again on the same data directory. It returns how long the server
// did not accept logins: from the kill until the restarted one answers.
func (m *mysqld) killAndRestart(ctx context.Context, down time.Duration) (time.Duration, error) {
	killed := time.Now()
	if err := m.signal(syscall.SIGKILL); err != nil {
		return 0, err
	}
	m.mu.Lock()
	exited := m.exited
	m.mu.Unlock()
	<-exited
	sleep(ctx, down)
	// A start that fails at once (a port or file not yet let go) is tried
	// again; its error log says why.
	err := ctx.Err() // the run ended before mariadbd was started again
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		if err = m.start(ctx); err == nil || !errors.Is(err, errExitedStarting) {
			break
		}
		m.log.Warn("mariadbd exited while starting; trying again", "err", err)
		sleep(ctx, 500*time.Millisecond)
	}
	return time.Since(killed), err
}

// errExitedStarting: mariadbd exited before it accepted a login.
var errExitedStarting = errors.New("mariadbd exited while starting")

// pause SIGSTOPs the server for d, then SIGCONTs it: its connections
// stay open but nothing answers on them.
func (m *mysqld) pause(ctx context.Context, d time.Duration) error {
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// The signal is only queued: a thread running on another core goes on
	// until the kernel stops it, so the pause counts from then.
	deadline := time.Now().Add(2 * time.Second)
	for !processStopped(m.pid()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	sleep(ctx, d)
	return m.signal(syscall.SIGCONT)
}

func (m *mysqld) pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// processStopped tells whether every thread of pid is stopped (state T
// in /proc/<pid>/task/*/stat).
func processStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// stop shuts the server down (SIGTERM, a clean shutdown; SIGKILL after
// 30 s).
func (m *mysqld) stop() {
	m.mu.Lock()
	exited, paused := m.exited, m.paused
	m.mu.Unlock()
	if exited == nil {
		return
	}
	if paused {
		_ = m.signal(syscall.SIGCONT)
	}
	_ = m.signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = m.signal(syscall.SIGKILL)
		<-exited
	}
}
