package faults

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"time"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/faults/netns"
)

// The partitions of the MySQL fleet's store: shapes of the partition
// fault drawn when the run has the MySQL fleet.
const (
	shapeMySQLReplica   = "mysql-primary-replica"
	shapeMySQLDispenser = "mysql-dispenser-primary"
)

// mysqlHosts are the MySQL servers' hosts (none without the fleet).
func (r *run) mysqlHosts() []*netns.Host {
	if r.mysql == nil {
		return nil
	}
	return []*netns.Host{r.mysql.primary.host, r.mysql.replica.host}
}

// mysqlPartition cuts the MySQL primary from its replica (replication
// stops: the replica falls behind), or one dispenser of the MySQL fleet
// from the primary's floating address (its store calls time out, its
// leases expire), with iptables in both sides' namespaces; holds the cut
// and heals it. Proven when the cut rules dropped packets and, for the
// replica, when it lacked some of the primary's transactions at the end
// of the cut; after the heal the replica must catch up.
func (r *run) mysqlPartition(ctx context.Context, shape string) (Proof, error) {
	m := r.mysql
	primary, replica := m.primary, m.replica
	p := Proof{Kind: KindPartition, Start: time.Now()}
	var err error
	switch shape {
	case shapeMySQLReplica:
		p.What = fmt.Sprintf("MySQL primary %s cut off from its replica %s", primary.name, replica.name)
		err = cutFrom(ctx, primary.host, replica.host, m.vip)
	case shapeMySQLDispenser:
		var fleet []*dispenser
		for _, d := range r.dispensers {
			if d.fleet == "uidmy" {
				fleet = append(fleet, d)
			}
		}
		d := fleet[r.rng.IntN(len(fleet))]
		p.What = fmt.Sprintf("MySQL-fleet dispenser %s cut off from the primary's address %s (%s)", d.name, m.vip, primary.name)
		err = cutFrom(ctx, primary.host, d.host, m.vip)
	default:
		return Proof{}, fmt.Errorf("faults: no partition shape %q", shape)
	}
	if err != nil {
		_, _ = r.healAll(ctx)
		return p, err
	}
	r.holdDropping(ctx)
	var lag int64
	var state string
	if shape == shapeMySQLReplica {
		lag, state, err = m.replicaLag(ctx)
	}
	dropped, healErr := r.healAll(ctx)
	p.End = time.Now()
	if err == nil {
		err = healErr
	}
	p.Proof = fmt.Sprintf("%d packets dropped by the cut rules", dropped)
	p.Proven = dropped > 0
	if shape == shapeMySQLReplica {
		caught := "caught up"
		if e := m.caughtUp(ctx, 90*time.Second); e != nil {
			caught = "not caught up"
			if err == nil {
				err = e
			}
		}
		p.Proof += fmt.Sprintf("; at the end of the cut the replica %s lacked %d of the primary's transactions (%s); %s %s after the heal",
			replica.name, lag, state, caught, time.Since(p.End).Round(time.Millisecond))
		p.Proven = p.Proven && lag > 0
	}
	return p, err
}

// cutFrom cuts host a from host b both ways, in both namespaces; b also
// loses a's floating address (the primary's, when a holds it).
func cutFrom(ctx context.Context, a, b *netns.Host, floating netip.Addr) error {
	if err := a.Block(ctx, []netip.Addr{b.Addr}, true, true); err != nil {
		return err
	}
	return b.Block(ctx, []netip.Addr{a.Addr, floating}, true, true)
}

// replicaLag is how many of the primary's transactions the replica has
// not applied, and its replication threads' state as SHOW SLAVE STATUS
// reports it.
func (p *mysqlPair) replicaLag(ctx context.Context) (lag int64, state string, err error) {
	wrote, err := p.primary.gtidSeq(ctx, "gtid_binlog_pos")
	if err != nil {
		return 0, "", err
	}
	applied, err := p.replica.gtidSeq(ctx, "gtid_slave_pos")
	if err != nil {
		return 0, "", err
	}
	st, err := p.replica.slaveStatus(ctx)
	if err != nil {
		return wrote - applied, "", err
	}
	state = fmt.Sprintf("Slave_IO_Running %s, Slave_SQL_Running %s, Seconds_Behind_Master %s", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Seconds_Behind_Master"])
	if e := st["Last_IO_Error"]; e != "" {
		state += ", Last_IO_Error " + e
	}
	return wrote - applied, state, nil
}

// slaveStatus is the server's SHOW SLAVE STATUS row, by column (NULL as
// "NULL").
func (m *mysqlServer) slaveStatus(ctx context.Context) (map[string]string, error) {
	db, err := sql.Open("mysql", m.socketDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, fmt.Errorf("faults: %s: %w", m.name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, fmt.Errorf("faults: %s is no replica (SHOW SLAVE STATUS is empty)", m.name)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("faults: %s: %w", m.name, err)
	}
	out := map[string]string{}
	for i, c := range cols {
		out[c] = "NULL"
		if vals[i].Valid {
			out[c] = vals[i].String
		}
	}
	return out, rows.Err()
}
