package natsconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// Each rule of Validate names the field in error, and names the other
// field its reason mentions by SettingName; a password is never quoted.
func TestValidateNamesTheField(t *testing.T) {
	byVar := func(field string) string { return "VAR_" + field }
	for _, c := range []struct {
		cfg     Config
		field   string
		mention string
	}{
		{Config{URL: "nats://a:4222, "}, "URL", "URL 2 of 2 is empty"},
		{Config{URL: "http://u:hunter2@a:4222"}, "URL", `scheme "http"`},
		{Config{URL: "nats://a:99999"}, "URL", "1..65535"},
		{Config{Password: "hunter2"}, "Password", "set without VAR_User"},
		{Config{User: "u", Token: "hunter2"}, "Token", "set together with VAR_User"},
		{Config{Token: "hunter2", CredsFile: "x.creds"}, "CredsFile", "set together with VAR_Token"},
		{Config{TLSKeyFile: "k.pem"}, "TLSCertFile", "VAR_TLSCertFile and VAR_TLSKeyFile together"},
		{Config{PingInterval: -time.Second}, "PingInterval", "-1s is negative"},
		{Config{NKeySeedFile: t.TempDir()}, "NKeySeedFile", "not a regular file"},
	} {
		c.cfg.SettingName = byVar
		err := c.cfg.Validate()
		var se *setting.Error
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Error(), c.mention) {
			t.Errorf("%+v: %v, want a *setting.Error of %s mentioning %q", c.cfg, err, c.field, c.mention)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v quotes the secret", err)
		}
	}
	if err := (Config{URL: "nats://a:4222,tls://b", User: "u", Password: "p"}).Validate(); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
}
