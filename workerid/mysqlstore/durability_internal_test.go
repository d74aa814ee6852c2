package mysqlstore

import (
	"strings"
	"testing"
)

// TestDurabilityFindings: each setting that lets the server forget an
// acknowledged commit is found, under MariaDB's and MySQL 8's names, and
// named with the value to set; durable settings find nothing.
func TestDurabilityFindings(t *testing.T) {
	durable := map[string]string{"innodb_flush_log_at_trx_commit": "1", "sync_binlog": "1", "log_bin": "ON", "read_only": "OFF",
		"rpl_semi_sync_master_enabled": "ON", "rpl_semi_sync_master_wait_point": "AFTER_SYNC", "rpl_semi_sync_master_timeout": "10000"}
	if got := durabilityFindings(durable); len(got) != 0 {
		t.Errorf("durable settings: %q", got)
	}
	if note := semiSyncNote(durable); !strings.Contains(note, "rpl_semi_sync_master_timeout=10000") {
		t.Errorf("semi-sync note %q does not name the timeout", note)
	}
	for name, c := range map[string]struct {
		vars map[string]string
		want string
	}{
		"flush":            {map[string]string{"innodb_flush_log_at_trx_commit": "2"}, "set innodb_flush_log_at_trx_commit=1"},
		"binlog":           {map[string]string{"sync_binlog": "0", "log_bin": "ON"}, "set sync_binlog=1"},
		"read only":        {map[string]string{"read_only": "ON"}, "point the DSN at the primary"},
		"mariadb semisync": {map[string]string{"rpl_semi_sync_master_enabled": "ON", "rpl_semi_sync_master_wait_point": "AFTER_COMMIT"}, "rpl_semi_sync_master_wait_point=AFTER_SYNC"},
		"mysql 8 semisync": {map[string]string{"rpl_semi_sync_source_enabled": "ON", "rpl_semi_sync_source_wait_point": "AFTER_COMMIT"}, "rpl_semi_sync_source_wait_point=AFTER_SYNC"},
	} {
		got := durabilityFindings(c.vars)
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%s: %q, want one finding saying %q", name, got, c.want)
		}
	}
	if got := durabilityFindings(map[string]string{"sync_binlog": "0", "log_bin": "OFF"}); len(got) != 0 {
		t.Errorf("sync_binlog=0 without a binary log: %q (nothing to sync)", got)
	}
}
