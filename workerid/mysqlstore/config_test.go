package mysqlstore_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// TestDefaultConfig: the defaults are valid, hold workerid's and
// schema.sql's table names, and a zero Config takes them: the zero Config
// with defaults is DefaultConfig, TablesByHand false (tables created).
func TestDefaultConfig(t *testing.T) {
	c := mysqlstore.DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	if c.DSN != "" || c.TablesByHand || c.WorkerNodeTable != "WORKER_NODE" || !reflect.DeepEqual(c.Config, workerid.DefaultConfig()) {
		t.Errorf("DefaultConfig = %+v", c)
	}
	zero := mysqlstore.Config{}.WithDefaults()
	if !reflect.DeepEqual(zero, c) {
		t.Errorf("zero Config with defaults\n %+v\nwant DefaultConfig\n %+v", zero, c)
	}
	set := mysqlstore.Config{FleetTable: "fleet", Config: workerid.Config{LeaseTTL: time.Minute}}.WithDefaults()
	if set.FleetTable != "fleet" || set.LeaseTTL != time.Minute || set.SequenceTable != c.SequenceTable || set.ReserveChunk != c.ReserveChunk {
		t.Errorf("WithDefaults changed a set value or missed a zero one: %+v", set)
	}
}

// Validate's errors about the tables name the Config field (the
// dispenser maps it to its variable); the other settings take their
// defaults.
func TestValidateNamesTheTableField(t *testing.T) {
	for _, tc := range []struct {
		c              mysqlstore.Config
		field, mention string
	}{
		{mysqlstore.Config{WorkerNodeTable: "WORKER_NODE; DROP TABLE x"}, "WorkerNodeTable", "identifier"},
		{mysqlstore.Config{WorkerLeaseTable: "1lease"}, "WorkerLeaseTable", "identifier"},
		{mysqlstore.Config{WorkerLeaseTable: "worker_node"}, "WorkerLeaseTable", "worker-node table"},
		{mysqlstore.Config{FleetTable: "worker_lease"}, "FleetTable", "worker-ID table"},
		{mysqlstore.Config{SequenceTable: "uid_fleet"}, "SequenceTable", "UID_FLEET"},
	} {
		err := tc.c.Validate()
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != tc.field || !strings.HasPrefix(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: err = %v, want a *setting.Error naming it and mentioning %q", tc.field, err, tc.mention)
		}
	}
}

// TestValidateNamesTheDSNField: a DSN the driver cannot read is a
// SettingError naming DSN, without the password; the other settings
// are checked as workerid.Config.Validate checks them.
func TestValidateNamesTheDSNField(t *testing.T) {
	c := mysqlstore.DefaultConfig()
	c.DSN = "root:hunter2-secret@127.0.0.1:3306/db"
	err := c.Validate()
	var se *setting.Error
	if !errors.As(err, &se) || se.Field != "DSN" || !strings.Contains(err.Error(), "valid DSN") {
		t.Errorf("err = %v, want a *setting.Error naming DSN", err)
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
	c.DSN = "root:hunter2-secret@tcp(127.0.0.1:3306)/db"
	if err := c.Validate(); err != nil {
		t.Errorf("valid DSN rejected: %v", err)
	}
	c.LeaseTTL = time.Millisecond
	if err := c.Validate(); !errors.As(err, &se) || se.Field != "LeaseTTL" {
		t.Errorf("LeaseTTL 1ms: %v, want the workerid.Config error", err)
	}
}

// FuzzValidateDSNKeepsPasswordSecret: whatever follows the credentials, a
// DSN's password never appears in Validate's error (unless it also
// appears after the credentials, where it is not a password).
func FuzzValidateDSNKeepsPasswordSecret(f *testing.F) {
	f.Add("s3cret-Pass", "tcp(127.0.0.1:3306)/db")
	f.Add("s3cret-Pass", "tcp(127.0.0.1:3306)/db?parseTime=maybe")
	f.Add("s3cret-Pass", "127.0.0.1:3306/db")
	f.Add("p@ss:word/x", "tcp(h)/d?timeout=xyz")
	f.Add("longpassword", "unix(/tmp/sock)/db?charset=%zz")
	f.Fuzz(func(t *testing.T, password, rest string) {
		if len(password) < 8 || strings.Contains(rest, password) {
			return
		}
		c := mysqlstore.DefaultConfig()
		c.DSN = "dispenser:" + password + "@" + rest
		err := c.Validate()
		if err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("error shows the password: %v", err)
		}
	})
}
