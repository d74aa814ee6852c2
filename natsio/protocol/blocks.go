package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
)

// Prefilled ID blocks: dispensers publish blocks of IDs into a JetStream
// work-queue stream (natsio.BlockPublisher) and services pull a block or
// two at a time and hand their IDs out in-process (uidclient.BlockSource).
// Each message is one block of IDs in increasing order, with the headers
// below, in one of two forms: runs of consecutive IDs, 16 bytes each as
// in a ranges reply, with the header Uid-Encoding: ranges (EncodeBlockRuns,
// what publishers send since ranges); or, without that header, the IDs
// packed big-endian, 8 bytes each (EncodeBlock, the older form, which
// consumers keep reading during a rolling upgrade).

// Headers of a block message.
const (
	HeaderBlockCount  = "Uid-Count"     // number of IDs in the block (decimal)
	HeaderBlockWorker = "Uid-Worker-Id" // worker ID of the claim the IDs come from
	HeaderBlockFirst  = "Uid-First"     // first ID (decimal)
	HeaderBlockLast   = "Uid-Last"      // last ID (decimal)
)

// Defaults of the block stream that publishers fill and sources read.
//
// A block's cost to JetStream is mostly per message: its store, delivery,
// double ack, removal and the consumer check each cost the same for 4,096
// IDs as for 32,768. At 4,096 IDs (32 KiB) three dispensers and four
// consumers as separate processes on two cores reached 4.9 M IDs/s; at
// 32,768 (256 KiB, a quarter of NATS's default maximum payload), 15 M
// (BENCHMARKS.md "JetStream blocks").
const (
	DefaultBlocksStream  = "UID_BLOCKS"
	DefaultBlocksSubject = "uid.blocks"
	DefaultBlockSize     = 32768
)

// Block claims (issue 31's D6, verify/blocks.pml): a source uses a block
// only after it claimed it with a KV Create of BlockClaimKey in the
// bucket BlockClaimsBucket(stream), waited the store's loss window and
// read its claim back at the stream leader. The publishers create the
// bucket beside the stream; a claim expires after BlockClaimsTTL, longer
// than the stream keeps a block (BlocksMaxAge), so a block that comes
// back finds its claim.
const (
	BlocksMaxAge   = time.Hour
	BlockClaimsTTL = 2 * BlocksMaxAge
)

// BlockClaimsBucket is the KV bucket of the claims on stream's blocks.
func BlockClaimsBucket(stream string) string { return stream + "_CLAIMS" }

// BlockClaimKey is the claim's key of the block whose first ID is first
// (IDs are unique, so the first names the block).
func BlockClaimKey(first uint64) string { return "block." + strconv.FormatUint(first, 10) }

// MaxBlockSize bounds the IDs per block of the binary form: 1 MiB of
// payload, NATS's default maximum message size.
const MaxBlockSize = 1 << 17

// MaxRunsBlockSize bounds the IDs per block of the ranges form, whose
// payload does not grow with them: one lane's second of the default
// layout. A consumer expands a block, 8 bytes per ID.
const MaxRunsBlockSize = 1 << 22

// ErrMalformedBlock is wrapped by the errors that describe a block message
// that does not decode (a consumer terminates such a block, never uses it).
var ErrMalformedBlock = errors.New("protocol: malformed ID block")

// blockMsgID is the Nats-Msg-Id of a block: IDs are unique, so the worker
// and first ID name the block for good, and a retried publish of the same
// block is stored once.
func blockMsgID(worker, first uint64) string {
	return "w" + strconv.FormatUint(worker, 10) + "-" + strconv.FormatUint(first, 10)
}

// EncodeBlock builds the message of a block of IDs (at least one) as
// BlockPublisher publishes it on subject and BlockSource decodes it.
func EncodeBlock(subject string, worker uint64, ids []uint64) *nats.Msg {
	data := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.BigEndian.PutUint64(data[8*i:], id)
	}
	first, last := ids[0], ids[len(ids)-1]
	h := nats.Header{}
	h.Set(HeaderBlockCount, strconv.Itoa(len(ids)))
	h.Set(HeaderBlockWorker, strconv.FormatUint(worker, 10))
	h.Set(HeaderBlockFirst, strconv.FormatUint(first, 10))
	h.Set(HeaderBlockLast, strconv.FormatUint(last, 10))
	h.Set(nats.MsgIdHdr, blockMsgID(worker, first))
	return &nats.Msg{Subject: subject, Data: data, Header: h}
}

// EncodeBlockRuns builds the message of a block given as runs of
// consecutive IDs (at least one run, increasing): the ranges form.
func EncodeBlockRuns(subject string, worker uint64, runs []Run) *nats.Msg {
	first, last := runs[0].First, runs[len(runs)-1].Last()
	h := nats.Header{}
	h.Set(EncodingHeader, EncodingRanges)
	h.Set(HeaderBlockCount, strconv.FormatUint(CountOf(runs), 10))
	h.Set(HeaderBlockWorker, strconv.FormatUint(worker, 10))
	h.Set(HeaderBlockFirst, strconv.FormatUint(first, 10))
	h.Set(HeaderBlockLast, strconv.FormatUint(last, 10))
	h.Set(nats.MsgIdHdr, blockMsgID(worker, first))
	return &nats.Msg{Subject: subject, Data: AppendRuns(nil, runs), Header: h}
}

// DecodeBlock checks a block message of either form and returns its IDs:
// strictly increasing (one take of one generator), at least one, and the
// count, first and last headers agree with the payload. Its errors wrap
// ErrMalformedBlock.
func DecodeBlock(data []byte, h nats.Header) ([]uint64, error) {
	if !isRunsBlock(h) {
		return decodeBinaryBlock(data, h)
	}
	runs, err := DecodeBlockRuns(data, h)
	if err != nil {
		return nil, err
	}
	return AppendIDs(make([]uint64, 0, CountOf(runs)), runs), nil
}

// isRunsBlock tells a block of the ranges form by its header.
func isRunsBlock(h nats.Header) bool {
	enc, err := RequestEncoding(h)
	return err == nil && enc == Ranges
}

// DecodeBlockRuns checks a block message of either form and returns its
// IDs as runs, as DecodeBlock checks them.
func DecodeBlockRuns(data []byte, h nats.Header) ([]Run, error) {
	if !isRunsBlock(h) {
		ids, err := decodeBinaryBlock(data, h)
		return RunsOf(nil, ids), err
	}
	runs, err := DecodeRuns(nil, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedBlock, err)
	}
	if len(runs) == 0 {
		return nil, malformedBlock("no runs in the payload")
	}
	n := CountOf(runs)
	if count, err := strconv.ParseUint(h.Get(HeaderBlockCount), 10, 64); err != nil || count != n || n > MaxRunsBlockSize {
		return nil, malformedBlock("%s %q does not match the %d IDs of the runs (at most %d)", HeaderBlockCount, quote.Shorten(h.Get(HeaderBlockCount), 512), n, MaxRunsBlockSize)
	}
	if err := checkFirstLast(h, runs[0].First, runs[len(runs)-1].Last()); err != nil {
		return nil, err
	}
	return runs, nil
}

func malformedBlock(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedBlock, fmt.Sprintf(format, args...))
}

// checkFirstLast checks the first and last headers of a block.
func checkFirstLast(h nats.Header, first, last uint64) error {
	for _, want := range []struct {
		header string
		id     uint64
	}{{HeaderBlockFirst, first}, {HeaderBlockLast, last}} {
		v, err := strconv.ParseUint(h.Get(want.header), 10, 64)
		if err != nil || v != want.id {
			return malformedBlock("%s %q does not match the payload's %d", want.header, quote.Shorten(h.Get(want.header), 512), want.id)
		}
	}
	return nil
}

// decodeBinaryBlock decodes a block of the binary form: whole 8-byte
// IDs, strictly increasing.
func decodeBinaryBlock(data []byte, h nats.Header) ([]uint64, error) {
	malformed := malformedBlock
	if len(data) == 0 || len(data)%8 != 0 {
		return nil, malformed("payload of %d bytes is not a whole number of 8-byte IDs", len(data))
	}
	n := len(data) / 8
	count, err := strconv.Atoi(h.Get(HeaderBlockCount))
	if err != nil || count != n {
		return nil, malformed("%s %q does not match the %d IDs in the payload", HeaderBlockCount, quote.Shorten(h.Get(HeaderBlockCount), 512), n)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.BigEndian.Uint64(data[8*i:])
		if i > 0 && ids[i] <= ids[i-1] {
			return nil, malformed("IDs not strictly increasing at position %d", i)
		}
	}
	if err := checkFirstLast(h, ids[0], ids[n-1]); err != nil {
		return nil, err
	}
	return ids, nil
}
