package dispenser

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
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
	checkDistinct(t, ids)
	if shares := workers(ids); shares[d.WorkerID()] != len(ids) {
		t.Fatalf("IDs per worker %v: want all from %d", shares, d.WorkerID())
	}
}
