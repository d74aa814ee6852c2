package natsio

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Protocol constants shared by the service and the client. Other languages
// speak the same protocol without our client: see the README's Protocol
// section.
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

	// EncodingHeader selects the batch reply's encoding; absent or any
	// other value means newline-separated decimal.
	EncodingHeader = "Uid-Encoding"
	// EncodingBinary packs each ID as 8 bytes big-endian.
	EncodingBinary = "binary"

	// DefaultMaxBatch is the largest count a batch request may ask for
	// unless configured otherwise; the connection's max payload may cap it
	// further (see MaxBatchFor).
	DefaultMaxBatch = 100_000

	// maxRequestBody bounds the body of a batch or parse request: a count
	// or an ID never needs more than a few dozen bytes, even padded with
	// whitespace.
	maxRequestBody = 64
	// decimalIDWidth is the worst-case size of one ID in a decimal batch
	// reply: 19 digits (an ID never has the sign bit) and a newline.
	decimalIDWidth = 20
	// binaryIDWidth is the size of one ID in a binary batch reply.
	binaryIDWidth = 8
)

// Subject returns the subject of an endpoint under prefix.
func Subject(prefix, endpoint string) string { return prefix + "." + endpoint }

// MaxBatchFor returns the largest count a batch request may ask for when
// replies may be at most maxPayload bytes (the connection's max payload)
// and configured is the configured largest batch.
func MaxBatchFor(configured int, maxPayload int64, binary bool) int {
	width := int64(decimalIDWidth)
	if binary {
		width = binaryIDWidth
	}
	return int(min(int64(configured), maxPayload/width))
}

// ParseCount reads the body of a batch request: a decimal count from 1 to
// max, surrounded by optional ASCII whitespace. Its errors are
// *ServiceError with code 400 and say what was wrong, quoting (a prefix
// of) the body.
func ParseCount(body []byte, max int) (int, error) {
	s, err := decimalBody(body, "count", "a decimal count of IDs, such as 100")
	if err != nil {
		return 0, err
	}
	n, negative, fits := parseDecimal(s)
	switch {
	case n == 0 && !fits:
		return 0, badRequest("count %q is not a decimal number", s)
	case negative && n != 0:
		return 0, badRequest("count %s is negative: ask for 1 to %d IDs", s, max)
	case n == 0 && fits:
		return 0, badRequest("count is 0: ask for 1 to %d IDs", max)
	case !fits || n > uint64(max):
		return 0, badRequest("count %s is too large: at most %d IDs per batch request", s, max)
	}
	return int(n), nil
}

// ParseIDRequest reads the body of a parse request: one decimal ID,
// surrounded by optional ASCII whitespace. Its errors are *ServiceError
// with code 400.
func ParseIDRequest(body []byte) (uint64, error) {
	s, err := decimalBody(body, "ID", "one decimal ID, such as 1234567890")
	if err != nil {
		return 0, err
	}
	id, negative, fits := parseDecimal(s)
	switch {
	case id == 0 && !fits:
		return 0, badRequest("ID %q is not a decimal number", s)
	case negative && id != 0:
		return 0, badRequest("ID %s is negative", s)
	case !fits:
		return 0, badRequest("ID %s does not fit in 64 bits", s)
	case id>>63 != 0:
		return 0, badRequest("ID %d has the sign bit set: no dispenser issues such IDs", id)
	}
	return id, nil
}

// parseDecimal reads an optionally signed decimal number. For a string
// that is not one it returns 0, false, false; for digits that overflow 64
// bits it returns a non-zero n with fits false.
func parseDecimal(s string) (n uint64, negative, fits bool) {
	digits := s
	if s[0] == '-' || s[0] == '+' {
		negative, digits = s[0] == '-', s[1:]
	}
	if digits == "" {
		return 0, false, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 1, negative, false // only a range error is left
	}
	return n, negative, true
}

// decimalBody checks the size and trims the body of a request whose body
// is one decimal number named what.
func decimalBody(body []byte, what, want string) (string, error) {
	if len(body) > maxRequestBody {
		return "", badRequest("body of %d bytes is too long for a %s: send %s", len(body), what, want)
	}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "", badRequest("%s missing: send %s", what, want)
	}
	return s, nil
}

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
