package uidclient

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Protocol constants shared by the service and the client. Other languages
// speak the same protocol without our client: see docs/protocol.md.
const (
	// ServiceName is the micro service name that `nats micro ls` shows.
	ServiceName = "uid-dispenser"
	// ServiceVersion is the semantic version of the protocol and service.
	ServiceVersion = "1.0.0"
	// DefaultQueueGroup is the queue group instances join. micro's own
	// default, "q", is shared with demo services such as
	// `nats bench service serve`, which would then answer our subjects.
	DefaultQueueGroup = "uid-dispenser"
	// DefaultSubjectPrefix prefixes the endpoint subjects: uid.next, ...
	DefaultSubjectPrefix = "uid"

	// EndpointNext answers one decimal ID to a request with any body.
	EndpointNext = "next"
	// EndpointBatch answers the number of IDs the body asks for.
	EndpointBatch = "batch"
	// EndpointParse answers the fields of the decimal ID in the body as JSON.
	EndpointParse = "parse"

	// EndpointSeqNext and EndpointSeqBatch are the micro endpoints of the
	// named sequences, on the subjects SeqSubject gives: next and batch
	// as for IDs, the numbers of one sequence.
	EndpointSeqNext  = "seq_next"
	EndpointSeqBatch = "seq_batch"

	// EncodingHeader selects the batch reply's encoding; absent or any
	// other value means newline-separated decimal.
	EncodingHeader = "Uid-Encoding"
	// EncodingBinary packs each ID as 8 bytes big-endian.
	EncodingBinary = "binary"

	// RetryAfterHeader comes with the 503 of an instance at its capacity:
	// the milliseconds after which it has IDs again (its next second).
	RetryAfterHeader = "Uid-Retry-After-Ms"

	// InstanceHeader comes with every reply of the sequence endpoints:
	// the micro instance ID of the instance that answered (as `nats
	// micro info` lists it). The numbers one instance hands out for a
	// name increase; across instances they interleave.
	InstanceHeader = "Uid-Instance"

	// binaryIDWidth is the size of one ID in a binary batch reply.
	binaryIDWidth = 8
)

// Subject returns the subject of an endpoint under prefix.
func Subject(prefix, endpoint string) string { return prefix + "." + endpoint }

// SeqSubject returns the subject of op (EndpointNext or EndpointBatch) on
// the sequence name under prefix: <prefix>.seq.<name>.<op>. With name "*"
// it is the wildcard the service subscribes to; a plain permission such
// as uid.seq.orders.> grants one sequence.
func SeqSubject(prefix, name, op string) string { return prefix + ".seq." + name + "." + op }

// AppendDecimalIDs appends ids to dst as decimal numbers separated by
// newlines (no trailing newline).
func AppendDecimalIDs(dst []byte, ids []uint64) []byte {
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, '\n')
		}
		dst = strconv.AppendUint(dst, id, 10)
	}
	return dst
}

// AppendBinaryIDs appends ids to dst packed as 8 bytes big-endian each.
func AppendBinaryIDs(dst []byte, ids []uint64) []byte {
	for _, id := range ids {
		dst = binary.BigEndian.AppendUint64(dst, id)
	}
	return dst
}

// DecodeBinaryIDs appends the IDs packed in data (8 bytes big-endian each)
// to dst.
func DecodeBinaryIDs(dst []uint64, data []byte) ([]uint64, error) {
	if len(data)%binaryIDWidth != 0 {
		return dst, fmt.Errorf("natsio: binary batch reply of %d bytes is not a multiple of 8", len(data))
	}
	for i := 0; i < len(data); i += binaryIDWidth {
		dst = append(dst, binary.BigEndian.Uint64(data[i:]))
	}
	return dst, nil
}

// DecodeDecimalIDs appends the newline-separated decimal IDs in data to dst.
func DecodeDecimalIDs(dst []uint64, data []byte) ([]uint64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return dst, nil
	}
	for line := range strings.SplitSeq(s, "\n") {
		id, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return dst, fmt.Errorf("natsio: batch reply line %q is not a decimal ID", shorten(line, 40))
		}
		dst = append(dst, id)
	}
	return dst, nil
}

// shorten cuts s to at most n bytes for quoting in messages.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
