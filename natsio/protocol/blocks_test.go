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

func TestBlocksOfBothFormsDecodeAlike(t *testing.T) {
	runs := []Run{{First: 100, Count: 3}, {First: 1 << 40, Count: 2}}
	ids := []uint64{100, 101, 102, 1 << 40, 1<<40 + 1}
	ranged := EncodeBlockRuns("s", 7, runs)
	binary := EncodeBlock("s", 7, ids)
	if len(ranged.Data) != 2*RangeWidth || ranged.Header.Get(EncodingHeader) != EncodingRanges {
		t.Fatalf("ranges block: %d bytes, %s %q", len(ranged.Data), EncodingHeader, ranged.Header.Get(EncodingHeader))
	}
	for _, h := range []string{HeaderBlockCount, HeaderBlockFirst, HeaderBlockLast, jetstream.MsgIDHeader} {
		if ranged.Header.Get(h) != binary.Header.Get(h) {
			t.Errorf("%s: %q as ranges, %q as binary", h, ranged.Header.Get(h), binary.Header.Get(h))
		}
	}
	for _, m := range []*nats.Msg{ranged, binary} {
		got, err := DecodeBlock(m.Data, m.Header)
		if err != nil || !slices.Equal(got, ids) {
			t.Errorf("%q block: %v, %v", m.Header.Get(EncodingHeader), got, err)
		}
		gotRuns, err := DecodeBlockRuns(m.Data, m.Header)
		if err != nil || !slices.Equal(gotRuns, runs) {
			t.Errorf("%q block as runs: %v, %v", m.Header.Get(EncodingHeader), gotRuns, err)
		}
	}
	cases := map[string]func(m *nats.Msg){
		"no runs":        func(m *nats.Msg) { m.Data = nil },
		"torn":           func(m *nats.Msg) { m.Data = m.Data[:17] },
		"count mismatch": func(m *nats.Msg) { m.Header.Set(HeaderBlockCount, "6") },
		"first mismatch": func(m *nats.Msg) { m.Header.Set(HeaderBlockFirst, "101") },
		"last mismatch":  func(m *nats.Msg) { m.Header.Set(HeaderBlockLast, "102") },
		"overlapping":    func(m *nats.Msg) { m.Data = AppendRuns(nil, []Run{{100, 3}, {102, 2}}) },
		"too many IDs": func(m *nats.Msg) {
			m.Data = AppendRuns(nil, []Run{{1, MaxRunsBlockSize + 1}})
			m.Header.Set(HeaderBlockCount, strconv.Itoa(MaxRunsBlockSize+1))
			m.Header.Set(HeaderBlockFirst, "1")
			m.Header.Set(HeaderBlockLast, strconv.Itoa(MaxRunsBlockSize+1))
		},
	}
	for name, mutate := range cases {
		m := EncodeBlockRuns("s", 7, runs)
		mutate(m)
		if got, err := DecodeBlock(m.Data, m.Header); !errors.Is(err, ErrMalformedBlock) {
			t.Errorf("%s: decoded %v, %v; want ErrMalformedBlock", name, got, err)
		}
	}
}

// FuzzDecodeRunsBlock: a ranges block is accepted only as a publisher
// would have sent it.
func FuzzDecodeRunsBlock(f *testing.F) {
	for _, runs := range [][]Run{{{1, 1}}, {{5, 3}, {9, 1}}, {{1 << 40, 1 << 20}}} {
		m := EncodeBlockRuns("s", 1, runs)
		f.Add(m.Data, m.Header.Get(HeaderBlockCount), m.Header.Get(HeaderBlockFirst), m.Header.Get(HeaderBlockLast))
	}
	f.Add([]byte{}, "0", "", "")
	f.Fuzz(func(t *testing.T, data []byte, count, first, last string) {
		h := nats.Header{}
		h.Set(EncodingHeader, EncodingRanges)
		h.Set(HeaderBlockCount, count)
		h.Set(HeaderBlockFirst, first)
		h.Set(HeaderBlockLast, last)
		runs, err := DecodeBlockRuns(data, h)
		if err != nil {
			if !errors.Is(err, ErrMalformedBlock) || runs != nil {
				t.Fatalf("error %v with runs %v", err, runs)
			}
			return
		}
		again := EncodeBlockRuns("s", 1, runs)
		for _, k := range []string{HeaderBlockCount, HeaderBlockFirst, HeaderBlockLast} {
			if v, err := strconv.ParseUint(h.Get(k), 10, 64); err != nil || strconv.FormatUint(v, 10) != again.Header.Get(k) {
				t.Fatalf("accepted %s %q, the runs say %q", k, h.Get(k), again.Header.Get(k))
			}
		}
		if !bytes.Equal(again.Data, data) {
			t.Fatalf("accepted payload %x re-encodes to %x", data, again.Data)
		}
	})
}
