package mysqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/workerid"
	"github.com/uid-dispenser/uid-dispenser/workerid/mysqlstore"
)

// TestValidateNamesTheDSNField: a DSN the driver cannot read is a
// SettingError naming MySQLDSN, without the password; the other settings
// are checked as workerid.Config.Validate checks them.
func TestValidateNamesTheDSNField(t *testing.T) {
	c := workerid.DefaultConfig()
	c.MySQLDSN = "root:hunter2-secret@127.0.0.1:3306/db"
	err := mysqlstore.Validate(c)
	var se *workerid.SettingError
	if !errors.As(err, &se) || se.Field != "MySQLDSN" || !strings.Contains(err.Error(), "valid DSN") {
		t.Errorf("err = %v, want a SettingError naming MySQLDSN", err)
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
	c.MySQLDSN = "root:hunter2-secret@tcp(127.0.0.1:3306)/db"
	if err := mysqlstore.Validate(c); err != nil {
		t.Errorf("valid DSN rejected: %v", err)
	}
	c.LeaseTTL = time.Millisecond
	if err := mysqlstore.Validate(c); !errors.As(err, &se) || se.Field != "LeaseTTL" {
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
		c := workerid.DefaultConfig()
		c.MySQLDSN = "dispenser:" + password + "@" + rest
		err := mysqlstore.Validate(c)
		if err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("error shows the password: %v", err)
		}
	})
}
