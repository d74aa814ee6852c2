package mysqlstore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// The MySQL driver's own messages reach the instance's (JSON) log as
// warnings, never as plain lines on stderr, and never with the password.
func TestDriverMessagesGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	l := driverLogger{slog.New(slog.NewJSONHandler(&buf, nil)), "s3cret"}
	l.Print("packets.go:58: unexpected EOF for user:", "s3cret", "\n")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q (%v)", buf.String(), err)
	}
	if rec["level"] != "WARN" || !strings.Contains(rec["msg"].(string), "unexpected EOF") {
		t.Errorf("record %v", rec)
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Errorf("password in the log: %s", buf.String())
	}
}
