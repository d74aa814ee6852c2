package protocol

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDecodeBlockRejectsInconsistentBlocks(t *testing.T) {
	valid := func() *nats.Msg { return EncodeBlock("s", 1, []uint64{10, 20, 30}) }
	cases := map[string]func(m *nats.Msg){
		"empty":           func(m *nats.Msg) { m.Data = nil; m.Header.Set(HeaderBlockCount, "0") },
		"torn":            func(m *nats.Msg) { m.Data = m.Data[:23] },
		"count mismatch":  func(m *nats.Msg) { m.Header.Set(HeaderBlockCount, "4") },
		"count missing":   func(m *nats.Msg) { m.Header.Del(HeaderBlockCount) },
		"first mismatch":  func(m *nats.Msg) { m.Header.Set(HeaderBlockFirst, "11") },
		"last mismatch":   func(m *nats.Msg) { m.Header.Set(HeaderBlockLast, "-30") },
		"not increasing":  func(m *nats.Msg) { m.Data[15] = 10; m.Data[7] = 10 },
		"duplicate in it": func(m *nats.Msg) { m.Data[15] = 30 },
	}
	for name, mutate := range cases {
		m := valid()
		mutate(m)
		if ids, err := DecodeBlock(m.Data, m.Header); !errors.Is(err, ErrMalformedBlock) {
			t.Errorf("%s: decoded %v, %v; want ErrMalformedBlock", name, ids, err)
		}
	}
	m := valid()
	ids, err := DecodeBlock(m.Data, m.Header)
	if err != nil || !slices.Equal(ids, []uint64{10, 20, 30}) {
		t.Fatalf("valid block: %v, %v", ids, err)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != "w1-10" {
		t.Errorf("Nats-Msg-Id %q", got)
	}
}

func FuzzDecodeBlock(f *testing.F) {
	add := func(m *nats.Msg) {
		f.Add(m.Data, m.Header.Get(HeaderBlockCount), m.Header.Get(HeaderBlockFirst), m.Header.Get(HeaderBlockLast))
	}
	add(EncodeBlock("s", 1, []uint64{1}))
	add(EncodeBlock("s", 1, []uint64{1, 2, 3, 1 << 62}))
	add(EncodeBlock("s", 9, []uint64{0, 1<<64 - 1}))
	f.Add([]byte{1, 2, 3}, "1", "1", "1")
	f.Add(make([]byte, 16), "2", "0", "0")
	f.Add([]byte{}, "0", "", "")
	f.Add(make([]byte, 8), "+1", "0", "0")
	f.Fuzz(func(t *testing.T, data []byte, count, first, last string) {
		h := nats.Header{}
		h.Set(HeaderBlockCount, count)
		h.Set(HeaderBlockFirst, first)
		h.Set(HeaderBlockLast, last)
		ids, err := DecodeBlock(data, h)
		if err != nil {
			if !errors.Is(err, ErrMalformedBlock) || ids != nil {
				t.Fatalf("error %v with IDs %v", err, ids)
			}
			return
		}
		// Accepted: it must be what the publisher would have sent.
		again := EncodeBlock("s", 1, ids)
		n, _ := strconv.Atoi(count)
		f, _ := strconv.ParseUint(first, 10, 64)
		l, _ := strconv.ParseUint(last, 10, 64)
		if !bytes.Equal(again.Data, data) || n != len(ids) || f != ids[0] || l != ids[len(ids)-1] {
			t.Fatalf("accepted block %x (count %q, first %q, last %q) decodes to %v", data, count, first, last, ids)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("accepted non-increasing IDs %v", ids)
			}
		}
	})
}
