package testenv

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// LogBuffer is a log sink that a logger (or a server) and the test can
// share: writes and reads are serialised, so the test may search the log
// while the code under test is still writing to it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger is a text logger at level that writes to b.
func (b *LogBuffer) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

// JSONLogger is a JSON logger at level that writes to b, for tests that
// read the log's records back (Records).
func (b *LogBuffer) JSONLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

// Records parses what a JSONLogger wrote, one record a line; a line that
// is not a JSON object fails the test.
func (b *LogBuffer) Records(t testing.TB) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not a JSON record: %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}
