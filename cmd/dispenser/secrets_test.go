package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// TestSecretsNeverReachTheOutput runs the dispenser binary at debug level
// (text and JSON logs) with passwords and tokens in its URLs, variables
// and DSNs, through successful start-ups (serving an ID, then a graceful
// stop) and failed ones, and checks that no secret appears in anything it
// writes: its slog output and anything else on stderr or stdout.
func TestSecretsNeverReachTheOutput(t *testing.T) {
	const (
		password = "Pw-9f3kQz7"
		token    = "Tk-4hV8sLm2"
	)
	userSrv := testenv.NATS(t, &server.Options{Username: "disp", Password: password})
	userURL := userSrv.ClientURL()
	hostPort := strings.TrimPrefix(userURL, "nats://")
	tokenSrv := testenv.NATS(t, &server.Options{Authorization: token})
	tokenHostPort := strings.TrimPrefix(tokenSrv.ClientURL(), "nats://")
	refused := testenv.RefusedAddr(t) // unreachable: a port nobody can listen on meanwhile

	type run struct {
		name    string
		env     []string
		serves  bool            // start-up succeeds: take an ID, then SIGTERM
		client  natsconn.Config // how the test's client authenticates
		exit    int             // expected exit code of a failing start-up
		mention string          // a redacted form the output must show, proving the value was logged
	}
	runs := []run{
		{name: "password in the URL", env: []string{"DISPENSER_NATS_URL=nats://disp:" + password + "@" + hostPort},
			serves: true, client: natsconn.Config{URL: userURL, User: "disp", Password: password}, mention: "disp:xxxxx@"},
		{name: "password variable", env: []string{"DISPENSER_NATS_URL=" + userURL, "DISPENSER_NATS_USER=disp", "DISPENSER_NATS_PASSWORD=" + password},
			serves: true, client: natsconn.Config{URL: userURL, User: "disp", Password: password}},
		{name: "token variable", env: []string{"DISPENSER_NATS_URL=nats://" + tokenHostPort, "DISPENSER_NATS_TOKEN=" + token},
			serves: true, client: natsconn.Config{URL: "nats://" + tokenHostPort, Token: token}},
		{name: "token in the URL", env: []string{"DISPENSER_NATS_URL=nats://" + token + "@" + tokenHostPort},
			serves: true, client: natsconn.Config{URL: "nats://" + tokenHostPort, Token: token}, mention: "xxxxx@"},
		{name: "wrong password in the URL", env: []string{"DISPENSER_NATS_URL=nats://disp:" + password + "-wrong@" + hostPort},
			exit: 1, mention: "disp:xxxxx@"},
		{name: "wrong token variable", env: []string{"DISPENSER_NATS_URL=nats://" + tokenHostPort, "DISPENSER_NATS_TOKEN=" + token + "-wrong"},
			exit: 1, mention: "Authorization Violation"},
		{name: "unreachable NATS with a password", env: []string{"DISPENSER_NATS_URL=nats://disp:" + password + "@" + refused},
			exit: 1, mention: "disp:xxxxx@" + refused},
		{name: "unreachable MySQL with a password", env: []string{"DISPENSER_NATS_URL=" + userURL, "DISPENSER_NATS_USER=disp", "DISPENSER_NATS_PASSWORD=" + password,
			"DISPENSER_MYSQL_DSN=uid:" + password + "@tcp(" + refused + ")/uids?timeout=500ms", "DISPENSER_STORE_STARTUP_DEADLINE=1s"},
			exit: 1, mention: refused},
		{name: "unparseable DSN with a password", env: []string{"DISPENSER_MYSQL_DSN=uid:" + password + "@tcp(127.0.0.1:3306"},
			exit: 2, mention: "DISPENSER_MYSQL_DSN"},
		{name: "unparseable URL with a password", env: []string{"DISPENSER_NATS_URL=nats://disp:" + password + "@127.0.0.1:port"},
			exit: 2, mention: "DISPENSER_NATS_URL"},
	}
	if dsn, ok := mysqlUserWithPassword(t, password); ok {
		runs = append(runs,
			run{name: "MySQL DSN with a password", env: []string{"DISPENSER_NATS_URL=" + userURL, "DISPENSER_NATS_USER=disp", "DISPENSER_NATS_PASSWORD=" + password, "DISPENSER_MYSQL_DSN=" + dsn},
				serves: true, client: natsconn.Config{URL: userURL, User: "disp", Password: password}, mention: "MySQL"},
			run{name: "MySQL refuses the password", env: []string{"DISPENSER_NATS_URL=" + userURL, "DISPENSER_NATS_USER=disp", "DISPENSER_NATS_PASSWORD=" + password,
				"DISPENSER_MYSQL_DSN=" + strings.Replace(dsn, password, password+"-wrong", 1), "DISPENSER_STORE_STARTUP_DEADLINE=1s"},
				exit: 1, mention: "Access denied"})
	}

	for i, r := range runs {
		for _, format := range []string{"text", "json"} {
			t.Run(r.name+"/"+format, func(t *testing.T) {
				t.Parallel()
				// A worker-ID store of its own: a worker ID released by an
				// earlier run would start this one after its reservation.
				store := fmt.Sprintf("secrets_%d_%s", i, format)
				env := append([]string{"DISPENSER_LOG_LEVEL=debug", "DISPENSER_LOG_FORMAT=" + format, "DISPENSER_SHUTDOWN_TIMEOUT=5s",
					"DISPENSER_WORKER_KV_BUCKET=" + store, "DISPENSER_WORKER_LEASE_TABLE=" + store}, r.env...)
				c := startChild(t, env...)
				if r.serves {
					c.waitFor(t, `serving`)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					cfg := r.client
					cfg.Logger = nil
					conn, err := natsconn.Connect(ctx, cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					if _, err := uidclient.New(conn.Conn, uidclient.Config{}).Next(ctx); err != nil {
						t.Fatalf("no ID from the dispenser: %v\n%s", err, c.output())
					}
					if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
				}
				code := c.wait(t, 20*time.Second)
				out := c.output()
				want := 0
				if !r.serves {
					want = r.exit
				}
				if code != want {
					t.Fatalf("exit %d, want %d; output:\n%s", code, want, out)
				}
				for _, secret := range []string{password, token} {
					if strings.Contains(out, secret) {
						t.Fatalf("the output shows the secret %q:\n%s", secret, out)
					}
				}
				if r.mention != "" && !strings.Contains(out, r.mention) {
					t.Fatalf("the output lacks %q (so the test proves nothing):\n%s", r.mention, out)
				}
			})
		}
	}
}

// child is the dispenser running as a child process, its stdout and
// stderr collected line by line.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	out   strings.Builder
	done  chan struct{}
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	c := &child{cmd: command(t, nil, env...), lines: make(chan string, 1000), done: make(chan struct{})}
	pipe, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = c.cmd.Stdout // one pipe for both
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// waitFor waits for a line containing s.
func (c *child) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-c.done:
			t.Fatalf("the dispenser ended before %q:\n%s", s, c.output())
		case <-timeout:
			t.Fatalf("no %q within 20s:\n%s", s, c.output())
		}
	}
}

// wait waits for the exit (killing the process after timeout) and for
// the last of its output, and returns the exit code.
func (c *child) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	kill := time.AfterFunc(timeout, func() { _ = c.cmd.Process.Kill() })
	<-c.done // the pipe closes when the process exits
	err := c.cmd.Wait()
	if !kill.Stop() {
		t.Fatalf("still running after %v:\n%s", timeout, c.output())
	}
	return exitCode(err)
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// mysqlUserWithPassword makes a MySQL user with the password, owning a
// fresh database, and returns its DSN; ok is false (the MySQL cases are
// left out) when no MySQL server is reachable and UID_REQUIRE_MYSQL is
// not set.
func mysqlUserWithPassword(t *testing.T, password string) (dsn string, ok bool) {
	t.Helper()
	var rootDSN string
	t.Run("mysql", func(t *testing.T) { rootDSN = testenv.MySQL(t) }) // skips this subtest only
	if rootDSN == "" {
		return "", false
	}
	// testenv drops the database when the subtest ends: make our own.
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.DBName + "_secret"
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	user := db + "_u"
	for _, q := range []string{
		"CREATE DATABASE " + db,
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'",
		"CREATE USER '" + user + "'@'localhost' IDENTIFIED BY '" + password + "'",
		"GRANT ALL ON " + db + ".* TO '" + user + "'@'%'",
		"GRANT ALL ON " + db + ".* TO '" + user + "'@'localhost'",
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", strings.Replace(q, password, "***", 1), err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
		_, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'localhost'")
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + db)
	})
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true", user, password, cfg.Addr, db), true
}
