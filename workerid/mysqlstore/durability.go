package mysqlstore

import (
	"context"
	"fmt"
	"strings"
)

// durabilityVariables are the server variables that say whether MySQL
// keeps what it acknowledged, readable by any user. MySQL 8.0.26 renamed
// the semi-sync ones (master to source); MariaDB keeps the old names.
var durabilityVariables = []string{
	"innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "read_only",
	"rpl_semi_sync_master_enabled", "rpl_semi_sync_master_wait_point", "rpl_semi_sync_master_timeout",
	"rpl_semi_sync_source_enabled", "rpl_semi_sync_source_wait_point", "rpl_semi_sync_source_timeout",
}

// readDurability reads durabilityVariables (those the server has).
func (a *Assigner) readDurability(ctx context.Context) (map[string]string, error) {
	args := make([]any, len(durabilityVariables))
	for i, v := range durabilityVariables {
		args[i] = v
	}
	rows, err := a.db.QueryContext(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name IN (?"+strings.Repeat(", ?", len(args)-1)+")", args...)
	if err != nil {
		return nil, a.classify(err, "read the server's durability settings")
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		vars[strings.ToLower(name)] = value
	}
	return vars, rows.Err()
}

// durabilityFindings says which of the server's settings let it forget a
// transaction it acknowledged, each with what to change (docs/operations.md,
// "What the guarantees assume").
func durabilityFindings(vars map[string]string) []string {
	var out []string
	on := func(name string) bool {
		v := strings.ToUpper(vars[name])
		return v == "ON" || v == "1"
	}
	if v, ok := vars["innodb_flush_log_at_trx_commit"]; ok && v != "1" {
		out = append(out, fmt.Sprintf("innodb_flush_log_at_trx_commit=%s acknowledges commits before they are on disk, so a crash of the server forgets them: set innodb_flush_log_at_trx_commit=1", v))
	}
	if v, ok := vars["sync_binlog"]; ok && on("log_bin") && v != "1" {
		out = append(out, fmt.Sprintf("sync_binlog=%s with the binary log on: a crash loses committed transactions from the binlog that replicas (and so a failover) are built from: set sync_binlog=1", v))
	}
	if on("read_only") {
		out = append(out, "read_only=ON: the DSN reaches a replica, or a proxy that splits reads off to one, whose reads lag the primary's writes: point the DSN at the primary, with no read-splitting proxy")
	}
	for _, role := range []string{"master", "source"} {
		if !on("rpl_semi_sync_" + role + "_enabled") {
			continue
		}
		if wp := vars["rpl_semi_sync_"+role+"_wait_point"]; wp != "" && !strings.EqualFold(wp, "AFTER_SYNC") {
			out = append(out, fmt.Sprintf("rpl_semi_sync_%s_wait_point=%s commits before a replica has the transaction, so a failover after a crash can lose what other sessions already read: set rpl_semi_sync_%s_wait_point=AFTER_SYNC", role, wp, role))
		}
	}
	return out
}

// semiSyncNote describes the semi-sync fallback for the log, "" when
// semi-sync is off: whatever the settings, a primary that waits longer
// than the timeout for a replica goes on asynchronously, and a failover
// then loses its last transactions (the loss window must cover that).
func semiSyncNote(vars map[string]string) string {
	for _, role := range []string{"master", "source"} {
		if v := strings.ToUpper(vars["rpl_semi_sync_"+role+"_enabled"]); v == "ON" || v == "1" {
			return fmt.Sprintf("semi-synchronous replication falls back to asynchronous after rpl_semi_sync_%s_timeout=%s ms without a replica's acknowledgement; a failover then loses the primary's last transactions", role, vars["rpl_semi_sync_"+role+"_timeout"])
		}
	}
	return ""
}

// checkDurability reads the server's settings and applies StoreDurability
// to what they allow.
func (a *Assigner) checkDurability(ctx context.Context) error {
	vars, err := a.readDurability(ctx)
	if err != nil {
		return err
	}
	if note := semiSyncNote(vars); note != "" {
		a.log.Info("workerid: "+note, "store", a.storeName, "loss_window", a.cfg.LossWindow())
	}
	return a.cfg.CheckDurability(a.storeName, durabilityFindings(vars))
}
