package main

import (
	"encoding/binary"
	"errors"
	"testing"
)

// field appends field num holding body, length-delimited.
func field(b []byte, num uint64, body []byte) []byte {
	b = binary.AppendUvarint(b, num<<3|2)
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// span is a Span with the fields around its name that the walk skips: a
// trace ID, a kind (varint), a start time (fixed64) and flags (fixed32).
func span(name string) []byte {
	b := field(nil, 1, make([]byte, 16))
	b = field(b, spanName, []byte(name))
	b = binary.AppendUvarint(b, 6<<3) // wire type 0: varint
	b = binary.AppendUvarint(b, 2)
	b = binary.AppendUvarint(b, 7<<3|1)
	b = binary.LittleEndian.AppendUint64(b, 1_700_000_000_000_000_000)
	b = binary.AppendUvarint(b, 16<<3|5)
	return binary.LittleEndian.AppendUint32(b, 0x301)
}

func TestCountSpansByName(t *testing.T) {
	// Two resources: the first with two scopes, the second with one.
	scopeA := field(field(field(nil, 1, []byte("scope")), scopeSpans, span("process uid.next")), scopeSpans, span("process uid.next"))
	scopeB := field(nil, scopeSpans, span("padding"))
	scopeC := field(field(nil, scopeSpans, span("process uid.batch")), scopeSpans, span("process uid.next"))
	res1 := field(field(field(nil, 1, []byte("resource")), resourceScopeSpans, scopeA), resourceScopeSpans, scopeB)
	res2 := field(nil, resourceScopeSpans, scopeC)
	req := field(field(nil, requestResourceSpans, res1), requestResourceSpans, res2)

	counts := map[string]int64{}
	if err := countSpans(req, counts); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"process uid.next": 3, "padding": 1, "process uid.batch": 1}
	if len(counts) != len(want) {
		t.Fatalf("counts %v, want %v", counts, want)
	}
	for name, n := range want {
		if counts[name] != n {
			t.Errorf("%q: %d spans, want %d (all: %v)", name, counts[name], n, counts)
		}
	}

	if err := countSpans(req[:len(req)-3], map[string]int64{}); !errors.Is(err, errTruncated) {
		t.Errorf("a truncated request: %v, want errTruncated", err)
	}
}
