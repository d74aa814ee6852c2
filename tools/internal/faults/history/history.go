// Package history is the fault harness's client log, Jepsen style: every
// call a client makes is recorded when it is invoked and again when it
// completes, as ok (with the values the reply carried), failed (the call
// certainly had no effect the client can see: an error reply, no
// responders) or unknown (a timeout or a lost connection: the dispenser
// may have handed the values out, the client never saw them).
//
// A history is a file of JSON lines, one Op each, written by the client
// processes and read by the checker. Nothing here imports the code under
// test: the clients speak the wire protocol with nats.go.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Types of an Op.
const (
	Invoke  = "invoke"
	OK      = "ok"
	Fail    = "fail"
	Unknown = "unknown"
)

// Functions a client calls.
const (
	FuncIDs = "ids" // uid.batch
	FuncSeq = "seq" // uid.seq.<name>.batch
)

// Op is one line of a history.
type Op struct {
	Time    int64  `json:"t"`       // unix nanoseconds
	Process string `json:"process"` // the client process and worker, e.g. c0/3
	Call    int64  `json:"call"`    // the call's number within its process: an invoke and its completion share it
	Type    string `json:"type"`    // invoke, ok, fail, unknown
	Func    string `json:"f"`       // ids or seq
	// Fleet is the subject prefix called (uid, uidmy): fleets are
	// independent, so values are unique per fleet.
	Fleet   string   `json:"fleet,omitempty"`
	Name    string   `json:"name,omitempty"`
	Count   int      `json:"n"`                // values asked for
	Values  []uint64 `json:"values,omitempty"` // ok: what the reply carried
	Error   string   `json:"error,omitempty"`
	Replier string   `json:"replier,omitempty"` // the instance that answered (Uid-Instance), when it said
	// Attempts: requests the call made (a completion's); more than one
	// when the client retried a certain failure (no responders, a 503)
	// within the call's timeout, as the product's clients do. 0 in
	// histories written before it was recorded.
	Attempts int `json:"attempts,omitempty"`
}

// Writer appends Ops to a history file; safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
}

// Create creates (truncates) the history file at path.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := bufio.NewWriterSize(f, 256*1024)
	return &Writer{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends one Op.
func (w *Writer) Write(op Op) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(op)
}

// Flush writes what is buffered to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Flush()
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.w.Flush(); err != nil {
		w.f.Close()
		return fmt.Errorf("history: %w", err)
	}
	return w.f.Close()
}

// Read decodes every Op of a history. A truncated last line (a client
// killed mid-write) is an error: the checker must not pass on a history
// it could not read.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return ops, nil
}

// ReadFile reads a history file.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
