package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the harness's own SQL: setting up replication, reading positions

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
)

// mysqlServer is a mariadbd in a host of its own: the primary or the
// asynchronous replica of the MySQL fleet's store. Binary log on, GTIDs,
// durable commits (innodb_flush_log_at_trx_commit=1, sync_binlog=1): what
// the failover loses is only what the replica had not received.
type mysqlServer struct {
	name     string
	host     *netns.Host
	serverID int
	bin      string
	install  string
	dir      string
	onExit   func(*proc, error)
	proc     *proc
}

func (m *mysqlServer) dataDir() string { return filepath.Join(m.dir, "data") }
func (m *mysqlServer) socket() string  { return filepath.Join(m.dir, "mysqld.sock") }

// socketDSN is root over the Unix socket (the harness's own setup SQL).
func (m *mysqlServer) socketDSN() string { return "root@unix(" + m.socket() + ")/?timeout=2s" }

// initialize makes a fresh data directory (anything there goes).
func (m *mysqlServer) initialize(ctx context.Context) error {
	if err := os.RemoveAll(m.dataDir()); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	out, err := exec.CommandContext(ctx, m.install, "--no-defaults", "--datadir="+m.dataDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-log-file-size=16M", "--user=root").CombinedOutput()
	if err != nil {
		return fmt.Errorf("faults: %s: %w: %s", filepath.Base(m.install), err, out)
	}
	return nil
}

// start starts mariadbd and waits until root logs in over the socket.
func (m *mysqlServer) start(ctx context.Context) error {
	p, err := startProc(m.host, m.name, filepath.Join(m.dir, "mysqld.out"), os.Environ(), m.onExit, m.bin,
		"--no-defaults", "--datadir="+m.dataDir(), "--user=root",
		"--bind-address=0.0.0.0", "--port=3306", "--socket="+m.socket(),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--log-error="+filepath.Join(m.dir, "error.log"),
		"--skip-name-resolve", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
		// The binary log inside the data directory: a copy of the
		// directory (cloneFrom) carries it.
		"--server-id="+strconv.Itoa(m.serverID), "--log-bin=binlog", "--relay-log=relay",
		"--binlog-format=ROW", "--log-slave-updates", "--skip-slave-start",
		"--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1")
	if err != nil {
		return err
	}
	m.proc = p
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return waitFor(ctx, 60*time.Second, func() bool { return p.alive() && db.PingContext(ctx) == nil })
}

// exec runs statements as root over the socket.
func (m *mysqlServer) exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("faults: %s: %w", m.name, err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("faults: %s: %s: %w", m.name, s, err)
		}
	}
	return nil
}

// gtidSeq is the sequence number of the server's last transaction of
// domain 0 in the given GTID variable (gtid_binlog_pos: what it wrote;
// gtid_slave_pos: what it applied as a replica).
func (m *mysqlServer) gtidSeq(ctx context.Context, variable string) (int64, error) {
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@"+variable).Scan(&pos); err != nil {
		return 0, fmt.Errorf("faults: %s: %w", m.name, err)
	}
	var best int64
	for _, g := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) == 3 && parts[0] == "0" {
			n, err := strconv.ParseInt(parts[2], 10, 64)
			if err == nil {
				best = max(best, n)
			}
		}
	}
	return best, nil
}

// setUpAsPrimary creates the account the dispensers use (root from any
// host of the run) and the database.
func (m *mysqlServer) setUpAsPrimary(ctx context.Context) error {
	return m.exec(ctx,
		"CREATE USER IF NOT EXISTS 'root'@'%'",
		"GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION",
		"CREATE DATABASE IF NOT EXISTS uid")
}

// cloneFrom replaces the (stopped) server's data with a copy of src's,
// taken while src is frozen (SIGSTOP): crash-consistent, as a snapshot of
// a volume is; InnoDB and the binary log recover together at start.
func (m *mysqlServer) cloneFrom(ctx context.Context, src *mysqlServer) error {
	if err := src.proc.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	err := copyDir(ctx, src.dataDir(), m.dataDir())
	if e := src.proc.signal(syscall.SIGCONT); err == nil {
		err = e
	}
	return err
}

// follow makes the server (a clone of the primary) an asynchronous
// replica of the primary at addr, from where the clone's own binary log
// ends.
func (m *mysqlServer) follow(ctx context.Context, primary netip.Addr) error {
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return fmt.Errorf("faults: %s: %w", m.name, err)
	}
	return m.exec(ctx,
		"RESET SLAVE ALL",
		fmt.Sprintf("SET GLOBAL gtid_slave_pos='%s'", pos),
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=3306, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", primary),
		"START SLAVE")
}

// caughtUp waits until the replica applied every transaction the primary
// had written when it was asked.
func (p *mysqlPair) caughtUp(ctx context.Context, within time.Duration) error {
	wrote, err := p.primary.gtidSeq(ctx, "gtid_binlog_pos")
	if err != nil {
		return err
	}
	var applied int64
	if err := waitFor(ctx, within, func() bool {
		applied, err = p.replica.gtidSeq(ctx, "gtid_slave_pos")
		return err == nil && applied >= wrote
	}); err != nil {
		return fmt.Errorf("faults: replica %s at transaction %d, primary %s at %d: %w (log %s)",
			p.replica.name, applied, p.primary.name, wrote, err, filepath.Join(p.replica.dir, "error.log"))
	}
	return nil
}

// mysqlPair is the MySQL fleet's store: a primary, an asynchronous
// replica, and the floating address the dispensers reach the primary by.
type mysqlPair struct {
	primary, replica *mysqlServer
	vip              netip.Addr
	clients          []*netns.Host // hosts whose ARP cache must forget the address when it moves
}

// findMariaDB returns mariadbd and its install script, or an error.
func findMariaDB() (server, install string, err error) {
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		return ""
	}
	server = look("mariadbd", "/usr/sbin/mariadbd")
	install = look("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if server == "" || install == "" {
		return "", "", errors.New("faults: no mariadbd installed")
	}
	return server, install, nil
}

func newMySQLPair(ctx context.Context, network *netns.Network, dir string, onExit func(*proc, error)) (*mysqlPair, error) {
	bin, install, err := findMariaDB()
	if err != nil {
		return nil, err
	}
	pair := &mysqlPair{}
	for i, role := range []string{"m0", "m1"} {
		h, err := network.AddHost(ctx, role)
		if err != nil {
			return nil, err
		}
		m := &mysqlServer{name: role, host: h, serverID: i + 1, bin: bin, install: install, dir: filepath.Join(dir, role), onExit: onExit}
		if err := os.MkdirAll(m.dir, 0o750); err != nil {
			return nil, fmt.Errorf("faults: %w", err)
		}
		if i == 0 {
			pair.primary = m
			if err := m.initialize(ctx); err != nil {
				return nil, err
			}
			if err := m.start(ctx); err != nil {
				return nil, err
			}
			if err := m.setUpAsPrimary(ctx); err != nil {
				return nil, err
			}
			continue
		}
		pair.replica = m
		if err := m.cloneFrom(ctx, pair.primary); err != nil {
			return nil, err
		}
		if err := m.start(ctx); err != nil {
			return nil, err
		}
		if err := m.follow(ctx, pair.primary.host.Addr); err != nil {
			return nil, err
		}
	}
	var err2 error
	if pair.vip, err2 = network.SpareAddr(); err2 != nil {
		return nil, err2
	}
	return pair, pair.primary.host.AddAddr(ctx, pair.vip)
}

// dsn is the dispensers' DSN: root at the floating address.
func (p *mysqlPair) dsn() string {
	return fmt.Sprintf("root@tcp(%s:3306)/uid?timeout=2s&readTimeout=5s&writeTimeout=5s", p.vip)
}

// failover stops the replica's replication, lets the primary take
// writes for lag, kills the primary (-9), moves the floating address to
// the replica and promotes it, then builds a fresh replica where the old
// primary was. It returns how many of the primary's transactions the
// promoted replica lacks.
func (p *mysqlPair) failover(ctx context.Context, lag time.Duration) (lost int64, err error) {
	if err := p.caughtUp(ctx, 30*time.Second); err != nil {
		return 0, err
	}
	if err := p.replica.exec(ctx, "STOP SLAVE"); err != nil {
		return 0, err
	}
	_ = sleep(ctx, lag)
	old, lost, err := p.promote(ctx)
	if err != nil {
		return lost, err
	}
	return lost, p.rebuild(ctx, old)
}

// promote kills the primary (-9), moves the floating address to the
// replica and makes it the writable primary; it returns the old primary
// (dead) and how many of its transactions the promoted replica lacks.
func (p *mysqlPair) promote(ctx context.Context) (old *mysqlServer, lost int64, err error) {
	wrote, err := p.primary.gtidSeq(ctx, "gtid_binlog_pos")
	if err != nil {
		return nil, 0, err
	}
	p.primary.proc.kill()
	applied, err := p.replica.gtidSeq(ctx, "gtid_slave_pos")
	if err != nil {
		return nil, 0, err
	}
	lost = wrote - applied
	if err := p.moveAddress(ctx, p.primary, p.replica); err != nil {
		return nil, lost, err
	}
	if err := p.replica.exec(ctx, "RESET SLAVE ALL", "SET GLOBAL read_only=0"); err != nil {
		return nil, lost, err
	}
	old = p.primary
	p.primary, p.replica = p.replica, old
	return old, lost, nil
}

// moveAddress moves the floating address from one server's host to the
// other's, and makes the clients forget where it was.
func (p *mysqlPair) moveAddress(ctx context.Context, from, to *mysqlServer) error {
	if err := from.host.DelAddr(ctx, p.vip); err != nil {
		return err
	}
	if err := to.host.AddAddr(ctx, p.vip); err != nil {
		return err
	}
	for _, h := range p.clients {
		_ = h.FlushNeighbours(ctx)
	}
	return nil
}

// rebuild makes the (stopped) server old a fresh replica of the primary:
// its data holds transactions the primary never had, so it starts over
// as a clone of the primary, and follows it.
func (p *mysqlPair) rebuild(ctx context.Context, old *mysqlServer) error {
	if err := old.cloneFrom(ctx, p.primary); err != nil {
		return err
	}
	if err := old.start(ctx); err != nil {
		return err
	}
	return old.follow(ctx, p.primary.host.Addr)
}

// status reads one of the server's status variables.
func (m *mysqlServer) status(ctx context.Context, name string) (string, error) {
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	var n, v string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		return "", fmt.Errorf("faults: %s: status %s: %w", m.name, name, err)
	}
	return v, nil
}

// semiSyncFailover is failover under semi-synchronous replication that
// falls back to asynchronous (MariaDB's built-in semi-sync): the primary
// waits at most 500 ms for the replica's acknowledgement of a commit,
// the replica stops acknowledging (its replication stopped), the primary
// times out once and commits on without it for lag; then the primary is
// killed and the replica promoted. It returns what the promoted replica
// lacks and how many commits the primary made without an acknowledgement
// (Rpl_semi_sync_master_no_tx), the proof of the fallback.
func (p *mysqlPair) semiSyncFailover(ctx context.Context, lag time.Duration) (lost, unacked int64, err error) {
	if err := p.caughtUp(ctx, 30*time.Second); err != nil {
		return 0, 0, err
	}
	if err := p.primary.exec(ctx, "SET GLOBAL rpl_semi_sync_master_timeout=500", "SET GLOBAL rpl_semi_sync_master_enabled=1"); err != nil {
		return 0, 0, err
	}
	// The replica announces semi-sync when its I/O thread connects.
	if err := p.replica.exec(ctx, "SET GLOBAL rpl_semi_sync_slave_enabled=1", "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD"); err != nil {
		return 0, 0, err
	}
	if err := waitFor(ctx, 30*time.Second, func() bool {
		on, err1 := p.primary.status(ctx, "Rpl_semi_sync_master_status")
		clients, err2 := p.primary.status(ctx, "Rpl_semi_sync_master_clients")
		return err1 == nil && err2 == nil && on == "ON" && clients != "0"
	}); err != nil {
		return 0, 0, fmt.Errorf("faults: semi-sync never came on at %s: %w", p.primary.name, err)
	}
	noTx := func() int64 {
		v, _ := p.primary.status(ctx, "Rpl_semi_sync_master_no_tx")
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	before := noTx()
	if err := p.replica.exec(ctx, "STOP SLAVE"); err != nil {
		return 0, 0, err
	}
	_ = sleep(ctx, lag)
	if on, err := p.primary.status(ctx, "Rpl_semi_sync_master_status"); err != nil || on != "OFF" {
		return 0, 0, fmt.Errorf("faults: %s did not fall back to asynchronous replication (Rpl_semi_sync_master_status %q, %v)", p.primary.name, on, err)
	}
	unacked = noTx() - before
	old, lost, err := p.promote(ctx)
	if err != nil {
		return lost, unacked, err
	}
	// Neither server keeps semi-sync: the old primary restarts without
	// it, and the promoted replica's acknowledging side has no primary.
	if err := p.primary.exec(ctx, "SET GLOBAL rpl_semi_sync_slave_enabled=0"); err != nil {
		return lost, unacked, err
	}
	return lost, unacked, p.rebuild(ctx, old)
}

// failoverAndBack is a failover undone: as failover, but the old primary
// comes back on its own data, writable (fencing failed), and after hold
// the floating address moves back to it, the promoted one killed. The
// promoted primary's transactions since its promotion are lost, and the
// old primary's that it lacked are back. The promoted primary serves for
// hold from its promotion (longer only when the old primary's restart
// takes longer), so that the second loss too stays within the dispensers'
// loss window. It returns both counts and how long the promoted primary
// served.
func (p *mysqlPair) failoverAndBack(ctx context.Context, lag, hold time.Duration) (lackedAtPromotion, lostOnReturn int64, reign time.Duration, err error) {
	if err := p.caughtUp(ctx, 30*time.Second); err != nil {
		return 0, 0, 0, err
	}
	if err := p.replica.exec(ctx, "STOP SLAVE"); err != nil {
		return 0, 0, 0, err
	}
	_ = sleep(ctx, lag)
	promotedAt, err := p.replica.gtidSeq(ctx, "gtid_slave_pos")
	if err != nil {
		return 0, 0, 0, err
	}
	old, lacked, err := p.promote(ctx)
	promotion := time.Now()
	if err != nil {
		return lacked, 0, 0, err
	}
	if err := old.start(ctx); err != nil { // its own data, writable
		return lacked, 0, time.Since(promotion), err
	}
	_ = sleep(ctx, hold-time.Since(promotion))
	wrote, err := p.primary.gtidSeq(ctx, "gtid_binlog_pos")
	if err != nil {
		return lacked, 0, time.Since(promotion), err
	}
	promoted := p.primary
	promoted.proc.kill()
	reign = time.Since(promotion)
	if err := p.moveAddress(ctx, promoted, old); err != nil {
		return lacked, wrote - promotedAt, reign, err
	}
	p.primary, p.replica = old, promoted
	return lacked, wrote - promotedAt, reign, p.rebuild(ctx, promoted)
}

func (p *mysqlPair) shutdown() {
	for _, m := range []*mysqlServer{p.primary, p.replica} {
		if m != nil && m.proc != nil && m.proc.alive() {
			m.proc.kill()
		}
	}
}
