package uidclient_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

// This file runs protocol/cases.json, the protocol as language-neutral
// cases that every client's tests run (protocol/README.md describes the
// format). It speaks the wire protocol with plain nats.go requests, not
// through the client, so that the cases test the service; the replies
// section then checks how the client reads error replies.

const protocolCasesFile = "../../protocol/cases.json"

type protocolCases struct {
	Dispenser struct {
		Env map[string]string `json:"env"`
	} `json:"dispenser"`
	Cases   []protocolCase `json:"cases"`
	Replies struct {
		Cases []replyCase `json:"cases"`
	} `json:"replies"`
}

type protocolCase struct {
	Name    string `json:"name"`
	Pending string `json:"pending"`
	Request struct {
		Subject string            `json:"subject"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	Reply struct {
		Error *struct {
			Code                int    `json:"code"`
			DescriptionContains string `json:"description_contains"`
		} `json:"error"`
		NoResponders bool              `json:"no_responders"`
		Headers      map[string]string `json:"headers"` // name: regular expression of the value
		Body         caseBody          `json:"body"`
	} `json:"reply"`
}

type caseBody struct {
	Type   string   `json:"type"`
	Count  int      `json:"count"`
	Equals string   `json:"equals"`
	First  string   `json:"first"`
	Dense  bool     `json:"dense"`
	Keys   []string `json:"keys"`
	// KeysInclude: at least these keys, values of any type.
	KeysInclude []string          `json:"keys_include"`
	Values      map[string]string `json:"values"`
}

type replyCase struct {
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
	Outcome struct {
		Error        string `json:"error"`
		Retried      bool   `json:"retried"`
		RetryAfterMs int64  `json:"retry_after_ms"`
	} `json:"outcome"`
}

func loadProtocolCases(t *testing.T) protocolCases {
	t.Helper()
	data, err := os.ReadFile(protocolCasesFile)
	if err != nil {
		t.Fatal(err)
	}
	var pc protocolCases
	if err := json.Unmarshal(data, &pc); err != nil {
		t.Fatalf("%s: %v", protocolCasesFile, err)
	}
	if len(pc.Cases) == 0 || len(pc.Replies.Cases) == 0 {
		t.Fatalf("%s holds no cases", protocolCasesFile)
	}
	return pc
}

// TestProtocolCases runs every live case, in file order, against a
// dispenser started in-process from the file's environment on a fresh
// embedded nats-server (so a fresh KV store). A pending case (server side
// not there yet) that fails is skipped; one that passes says so, so that
// its mark can go.
func TestProtocolCases(t *testing.T) {
	pc := loadProtocolCases(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	url := testenv.NATS(t, nil).ClientURL()
	startCasesDispenser(t, url, pc.Dispenser.Env)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	codes := map[int]bool{}
	for _, c := range pc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			msg := nats.NewMsg(c.Request.Subject)
			msg.Data = []byte(c.Request.Body)
			for k, v := range c.Request.Headers {
				msg.Header[k] = []string{v} // as written: no canonical form
			}
			reply, err := nc.RequestMsg(msg, 5*time.Second)
			problems := checkCase(c, reply, err)
			switch {
			case c.Pending != "" && len(problems) > 0:
				t.Skipf("pending (%s): %s", c.Pending, strings.Join(problems, "; "))
			case c.Pending != "":
				t.Logf("pending (%s) but passes now: remove its pending mark", c.Pending)
			}
			for _, p := range problems {
				t.Error(p)
			}
			if c.Reply.Error != nil && c.Pending == "" {
				codes[c.Reply.Error.Code] = true
			}
		})
	}
	// The file covers every code a live dispenser can be made to send.
	for _, code := range []int{protocol.CodeBadRequest, protocol.CodeNotFound, protocol.CodeUnavailable} {
		if !codes[code] {
			t.Errorf("no live case expects %d", code)
		}
	}
}

// startCasesDispenser runs the real dispenser wiring (configuration from
// the environment, KV worker-ID store, sequences, micro service) as the
// binary would, until the test ends.
func startCasesDispenser(t *testing.T, url string, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("DISPENSER_NATS_URL", url)
	cfg, err := dispenser.LoadConfig()
	if err != nil {
		t.Fatalf("the cases' dispenser environment: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log testenv.LogBuffer
	d, err := dispenser.Start(ctx, cfg, dispenser.WithLogger(log.Logger(slog.LevelWarn)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("dispenser shutdown: %v", err)
		}
		if t.Failed() {
			t.Logf("dispenser log:\n%s", log.String())
		}
	})
}

// checkCase compares a reply with the case's expectations and says what
// differs (nothing: it passes).
func checkCase(c protocolCase, reply *nats.Msg, err error) []string {
	want := c.Reply
	if want.NoResponders {
		if !errors.Is(err, nats.ErrNoResponders) {
			return []string{fmt.Sprintf("want no responders, got %v", err)}
		}
		return nil
	}
	if err != nil {
		return []string{fmt.Sprintf("request: %v", err)}
	}
	var problems []string
	code, description := headerValue(reply.Header, "Nats-Service-Error-Code"), headerValue(reply.Header, "Nats-Service-Error")
	switch {
	case want.Error == nil && code != "":
		problems = append(problems, fmt.Sprintf("want a reply, got error %s %q", code, description))
	case want.Error != nil && code != strconv.Itoa(want.Error.Code):
		problems = append(problems, fmt.Sprintf("want error %d, got code %q (%q), body %q", want.Error.Code, code, description, shortBody(reply.Data)))
	case want.Error != nil && !strings.Contains(description, want.Error.DescriptionContains):
		problems = append(problems, fmt.Sprintf("error description %q does not contain %q", description, want.Error.DescriptionContains))
	}
	for name, pattern := range want.Headers {
		v := headerValue(reply.Header, name)
		if ok, err := regexp.MatchString(pattern, v); err != nil || !ok || v == "" {
			problems = append(problems, fmt.Sprintf("header %s = %q, want a value matching %s", name, v, pattern))
		}
	}
	if err := checkBody(want.Body, reply.Data); err != nil {
		problems = append(problems, "body: "+err.Error())
	}
	return problems
}

// checkBody checks a reply body against its shape (protocol/README.md).
func checkBody(want caseBody, data []byte) error {
	switch want.Type {
	case "empty":
		if len(data) != 0 {
			return fmt.Errorf("want empty, got %q", shortBody(data))
		}
		return nil
	case "decimal", "base32":
		id, err := caseID(want.Type, string(data))
		if err == nil && want.Equals != "" && strconv.FormatUint(id, 10) != want.Equals {
			err = fmt.Errorf("got %d, want %s", id, want.Equals)
		}
		return err
	case "decimal_lines", "base32_lines", "binary", "ranges":
		ids, err := caseIDs(want.Type, data)
		if err != nil {
			return err
		}
		return checkIDs(want, ids)
	case "json":
		return checkJSON(want, data)
	}
	return fmt.Errorf("unknown body type %q in the cases file", want.Type)
}

var decimalID = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// caseID reads one ID in decimal or base32, below 2^63 as every ID.
func caseID(kind, s string) (uint64, error) {
	var id uint64
	var err error
	if kind == "base32" || kind == "base32_lines" {
		id, err = crockford(s)
	} else if !decimalID.MatchString(s) {
		err = fmt.Errorf("%q is not a decimal ID", s)
	} else {
		id, err = strconv.ParseUint(s, 10, 64)
	}
	if err == nil && id>>63 != 0 {
		err = fmt.Errorf("ID %d has the sign bit set", id)
	}
	return id, err
}

func caseIDs(kind string, data []byte) ([]uint64, error) {
	if kind == "ranges" {
		// Read here, not with the client's decoder: the cases check the
		// wire, so a bug there must not hide one here.
		if len(data)%16 != 0 {
			return nil, fmt.Errorf("%d bytes is not a multiple of 16", len(data))
		}
		var ids []uint64
		for i := 0; i < len(data); i += 16 {
			first, count := binary.BigEndian.Uint64(data[i:]), binary.BigEndian.Uint64(data[i+8:])
			if count == 0 || count > 1<<20 || first>>63 != 0 || (first+count-1)>>63 != 0 {
				return nil, fmt.Errorf("run %d: %d IDs from %d", i/16, count, first)
			}
			if len(ids) > 0 && first <= ids[len(ids)-1] {
				return nil, fmt.Errorf("run %d starts at %d, not after %d", i/16, first, ids[len(ids)-1])
			}
			for k := range count {
				ids = append(ids, first+k)
			}
		}
		return ids, nil
	}
	if kind == "binary" {
		if len(data)%8 != 0 {
			return nil, fmt.Errorf("%d bytes is not a multiple of 8", len(data))
		}
		ids := make([]uint64, len(data)/8)
		for i := range ids {
			ids[i] = binary.BigEndian.Uint64(data[8*i:])
		}
		return ids, nil
	}
	var ids []uint64
	for line := range strings.SplitSeq(string(data), "\n") {
		id, err := caseID(kind, line)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func checkIDs(want caseBody, ids []uint64) error {
	if len(ids) != want.Count {
		return fmt.Errorf("%d IDs, want %d", len(ids), want.Count)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] || (want.Dense && ids[i] != ids[i-1]+1) {
			return fmt.Errorf("ID %d after %d: not increasing (dense %v)", ids[i], ids[i-1], want.Dense)
		}
	}
	if want.First != "" && strconv.FormatUint(ids[0], 10) != want.First {
		return fmt.Errorf("first ID %d, want %s", ids[0], want.First)
	}
	return nil
}

func checkJSON(want caseBody, data []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("%q is not a JSON object: %w", shortBody(data), err)
	}
	for _, k := range want.KeysInclude {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("no key %s in %s", k, shortBody(data))
		}
	}
	if want.Keys != nil {
		var keys []string
		for k, v := range obj {
			keys = append(keys, k)
			if _, ok := v.(string); !ok {
				return fmt.Errorf("value of %s is %T, not a string", k, v)
			}
		}
		if slices.Sort(keys); !slices.Equal(keys, slices.Sorted(slices.Values(want.Keys))) {
			return fmt.Errorf("keys %v, want %v", keys, want.Keys)
		}
	}
	for k, v := range want.Values {
		if obj[k] != v {
			return fmt.Errorf("%s = %q, want %q", k, obj[k], v)
		}
	}
	return nil
}

// crockford decodes a 13-character Crockford base32 ID as a server sends
// it: upper case, from the alphabet only.
func crockford(s string) (uint64, error) {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	if len(s) != 13 {
		return 0, fmt.Errorf("base32 ID %q is not 13 characters", s)
	}
	var n uint64
	for i, c := range s {
		v := strings.IndexRune(alphabet, c)
		if v < 0 || (i == 0 && v > 15) {
			return 0, fmt.Errorf("base32 ID %q: %q not allowed at %d", s, c, i)
		}
		n = n<<5 | uint64(v)
	}
	return n, nil
}

// headerValue is a header's first value, its name matched in any case
// (nats.Header is a plain map).
func headerValue(h nats.Header, name string) string {
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func shortBody(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// TestProtocolReplies runs the file's replies section through the Go
// client: each error reply comes from a plain responder, which answers a
// retry with the ID 42; a reply's retry hint is the *ServiceError's
// RetryAfter.
func TestProtocolReplies(t *testing.T) {
	pc := loadProtocolCases(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	nc, err := nats.Connect(testenv.NATS(t, nil).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i, rc := range pc.Replies.Cases {
		t.Run(rc.Name, func(t *testing.T) {
			prefix := fmt.Sprintf("replies%d", i)
			var served int
			sub, err := nc.Subscribe(prefix+".next", func(m *nats.Msg) {
				served++
				reply := nats.NewMsg(m.Reply)
				if served == 1 {
					for k, v := range rc.Headers {
						reply.Header[k] = []string{v}
					}
				} else {
					reply.Data = []byte("42")
				}
				_ = m.RespondMsg(reply)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if code := rc.Headers[micro.ErrorCodeHeader]; code != "" {
				err := protocol.ErrorFromHeaders("uid.next", code, rc.Headers[micro.ErrorHeader], rc.Headers[protocol.RetryAfterHeader])
				var se *protocol.ServiceError
				if !errors.As(err, &se) || se.RetryAfter != time.Duration(rc.Outcome.RetryAfterMs)*time.Millisecond {
					t.Errorf("the reply's retry hint: %v, want %d ms", se, rc.Outcome.RetryAfterMs)
				}
			}
			client := uidclient.New(nc, uidclient.Config{SubjectPrefix: prefix})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			id, err := client.Next(ctx)
			retried := client.Stats().Retries > 0
			if retried != rc.Outcome.Retried {
				t.Errorf("retried %v, want %v (err %v)", retried, rc.Outcome.Retried, err)
			}
			if rc.Outcome.Retried {
				if err != nil || id != 42 {
					t.Fatalf("after the retry: %d, %v", id, err)
				}
				return
			}
			kinds := map[string]error{"bad_request": uidclient.ErrBadRequest, "unknown_sequence": uidclient.ErrNotFound, "unavailable": uidclient.ErrUnavailable}
			for kind, sentinel := range kinds {
				if errors.Is(err, sentinel) != (kind == rc.Outcome.Error) {
					t.Errorf("%v: errors.Is(%v) = %v, want the outcome %s", err, sentinel, !(kind == rc.Outcome.Error), rc.Outcome.Error)
				}
			}
			var se *uidclient.ServiceError
			if !errors.As(err, &se) {
				t.Errorf("%v is not a *ServiceError", err)
			}
		})
	}
}
