package dispenser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// delayedTCPForwarder listens on a free loopback port after delay and
// forwards each connection to target; before that the port refuses
// connections, as a database that is still starting does. It stands in for
// the network, not for a product component.
func delayedTCPForwarder(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	addr := freeAddr(t)
	var (
		mu    sync.Mutex
		ln    net.Listener
		conns []net.Conn
		wg    sync.WaitGroup
	)
	timer := time.AfterFunc(delay, func() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("forwarder: %v", err)
			return
		}
		mu.Lock()
		ln = l
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				in, err := l.Accept()
				if err != nil {
					return
				}
				out, err := net.Dial("tcp", target)
				if err != nil {
					in.Close()
					continue
				}
				mu.Lock()
				conns = append(conns, in, out)
				mu.Unlock()
				wg.Add(2)
				go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
				go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
			}
		}()
	})
	t.Cleanup(func() {
		timer.Stop()
		mu.Lock()
		if ln != nil {
			ln.Close()
		}
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return addr
}

// A store that comes up during start-up is waited for up to
// DISPENSER_STORE_STARTUP_DEADLINE, however short the NATS connect
// timeout is: the two bound different things.
func TestStartWaitsForTheStoreUpToItsOwnDeadline(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mcfg.Addr = delayedTCPForwarder(t, mcfg.Addr, 2500*time.Millisecond)
	mcfg.Timeout = time.Second
	cfg := testConfig(url, mcfg.FormatDSN())
	cfg.NATSConnectTimeout = time.Second
	cfg.StoreStartupDeadline = 15 * time.Second
	d := start(t, cfg)
	ids := collect(t, client(t, url), 2, 500, nil)
	testenv.CheckDistinct(t, ids)
	if shares := workers(t, ids); shares[d.WorkerID()] != len(ids) {
		t.Fatalf("IDs per worker %v: want all from %d", shares, d.WorkerID())
	}
}

// NATS that comes up during start-up (a container started before it) is
// waited for up to DISPENSER_NATS_CONNECT_TIMEOUT, each failed attempt
// logged once at info, and the instance then serves: the server here
// starts on a fixed port about two seconds after the dispenser.
func TestStartWaitsForNATS(t *testing.T) {
	addr := freeAddr(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("nats://"+addr, "")
	cfg.NATSConnectTimeout = 20 * time.Second
	var log testenv.LogBuffer
	started := make(chan error, 1)
	var d *Dispenser
	go func() {
		var err error
		d, err = Start(context.Background(), cfg, WithLogger(log.Logger(slog.LevelInfo)))
		started <- err
	}()
	// Five failed attempts back off 100+200+400+800 ms: about 1.5 s.
	waitForLog(t, &log, "attempt=5")
	select {
	case err := <-started:
		t.Fatalf("Start returned before NATS was up: %v", err)
	default:
	}
	p, _ := strconv.Atoi(port)
	url := testenv.NATS(t, &server.Options{Host: host, Port: p}).ClientURL()
	if err := <-started; err != nil {
		t.Fatalf("Start after NATS came up: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { shutdown(t, d) })
	testenv.CheckDistinct(t, collect(t, client(t, url), 2, 200, nil))
	for i := 1; i <= 5; i++ {
		line := fmt.Sprintf("attempt=%d ", i)
		if n := strings.Count(log.String(), line); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", line, n, log.String())
		}
	}
	if !strings.Contains(log.String(), `level=INFO msg="NATS not reachable yet; retrying"`) {
		t.Errorf("the attempts are not logged at info:\n%s", log.String())
	}
}

// A server that never comes up fails start-up at the connect timeout,
// naming the URL and how often it was tried.
func TestStartGivesUpOnNATSAtTheConnectTimeout(t *testing.T) {
	cfg := testConfig("nats://"+freeAddr(t), "")
	cfg.NATSConnectTimeout = 1500 * time.Millisecond
	began := time.Now()
	_, err := Start(context.Background(), cfg, WithLogger(testLogger()))
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), cfg.NATSURL) || !strings.Contains(err.Error(), "attempts in") {
		t.Fatalf("err = %v", err)
	}
	// Not before the timeout; after it, 30 s is a safety net for a
	// start-up that never gives up, not a bound on speed.
	if took < cfg.NATSConnectTimeout-100*time.Millisecond || took > cfg.NATSConnectTimeout+30*time.Second {
		t.Fatalf("gave up after %v, want about %v", took, cfg.NATSConnectTimeout)
	}
}

// UidGenerator's container variables name the instance in the worker-ID
// store: the dispenser reads them (the libraries read no environment)
// and the lease records them; one without the other stops start-up.
func TestContainerVariablesNameTheInstance(t *testing.T) {
	url := testenv.NATS(t, nil).ClientURL()
	cfg := testConfig(url, "")
	t.Setenv("JPAAS_HOST", "10.1.2.3")
	t.Setenv("JPAAS_HTTP_PORT", "8080")
	t.Setenv("JPAAS_HOST_PORT_8080", "")
	d := start(t, cfg)
	_, _, lease, _ := leaseKey(t, url, cfg.WorkerKVBucket, d.WorkerID())
	if lease["host"] != "10.1.2.3" || lease["port"] != "8080" || lease["type"] != float64(workerid.HostContainer) {
		t.Fatalf("lease record %v, want host 10.1.2.3, port 8080, type %d", lease, workerid.HostContainer)
	}

	t.Setenv("JPAAS_HTTP_PORT", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d, err := Start(ctx, cfg, WithLogger(testLogger())); !errors.Is(err, workerid.ErrHostEnv) {
		if err == nil {
			shutdown(t, d)
		}
		t.Fatalf("JPAAS_HOST without a port: %v, want ErrHostEnv", err)
	}
}

// A MySQL store start-up cannot open fails naming the variables to
// check, saying "workerid:" once and never the password: one that stays
// unreachable past DISPENSER_STORE_STARTUP_DEADLINE, and a database that
// does not exist (which says to create it, at once: no retrying cures it).
func TestMySQLStartupFailuresNameTheVariables(t *testing.T) {
	dsn := testenv.MySQL(t)
	url := testenv.NATS(t, nil).ClientURL()
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const password = "Hunter2-xyzzy"
	unreachable := *mcfg
	unreachable.Addr, unreachable.Passwd, unreachable.Timeout = freeAddr(t), password, time.Second
	unknownDB := *mcfg
	unknownDB.DBName = "uid_no_such_database"
	for _, tc := range []struct {
		name     string
		dsn      string
		want     []string
		deadline time.Duration
	}{
		{"unreachable", unreachable.FormatDSN(), []string{"DISPENSER_MYSQL_DSN", "DISPENSER_STORE_STARTUP_DEADLINE=1s", "still failing after 1s", unreachable.Addr}, time.Second},
		{"unknown database", unknownDB.FormatDSN(), []string{"DISPENSER_MYSQL_DSN", "create it (CREATE DATABASE `uid_no_such_database`)"}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(url, tc.dsn)
			cfg.StoreStartupDeadline = tc.deadline
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			d, err := Start(ctx, cfg, WithLogger(testLogger()))
			if err == nil {
				shutdown(t, d)
				t.Fatal("started")
			}
			msg := err.Error()
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
			if n := strings.Count(msg, "workerid:"); n != 1 {
				t.Errorf("error says workerid: %d times: %s", n, msg)
			}
			if strings.Contains(msg, password) {
				t.Errorf("error shows the password: %s", msg)
			}
			t.Log(msg)
		})
	}
}
