package protocol

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
)

// Encoding is how a batch reply packs its IDs (or a sequence's numbers),
// as the request's EncodingHeader chose it.
//
// Each encoding is one case in each method below: a new one (base32, say)
// is a constant, its header value, its widest ID, and an append and a
// decode function.
type Encoding uint8

const (
	// Decimal is newline-separated decimal ASCII without a trailing
	// newline: the default, when the request has no EncodingHeader or one
	// with a value the service does not know.
	Decimal Encoding = iota
	// Binary is 8 bytes big-endian per ID, no separator
	// (EncodingHeader: EncodingBinary).
	Binary
)

// RequestEncoding is the encoding a request's headers ask for. The header's
// name and value are matched without regard to case: clients in other
// languages may lower-case them.
func RequestEncoding(h map[string][]string) Encoding {
	if strings.EqualFold(HeaderCarrier(h).Get(EncodingHeader), EncodingBinary) {
		return Binary
	}
	return Decimal
}

// HeaderValue is the EncodingHeader value that asks for e ("" for the
// default, which needs no header).
func (e Encoding) HeaderValue() string {
	if e == Binary {
		return EncodingBinary
	}
	return ""
}

// String names the encoding for messages.
func (e Encoding) String() string {
	if e == Binary {
		return EncodingBinary
	}
	return "decimal"
}

// MaxIDWidth is the most bytes one ID takes in a reply of encoding e,
// separator included, which bounds the IDs a reply of a given size holds:
// 8 binary; 20 decimal (19 digits, an ID never has the sign bit, and a
// newline).
func (e Encoding) MaxIDWidth() int {
	if e == Binary {
		return BinaryIDWidth
	}
	return decimalIDWidth
}

// Append appends ids to dst in encoding e.
func (e Encoding) Append(dst []byte, ids []uint64) []byte {
	if e == Binary {
		return appendBinaryIDs(dst, ids)
	}
	return appendDecimalIDs(dst, ids)
}

// Decode appends the IDs of a reply in encoding e to dst. Its error says
// what in data does not decode, quoting at most a few dozen bytes of it.
func (e Encoding) Decode(dst []uint64, data []byte) ([]uint64, error) {
	if e == Binary {
		return decodeBinaryIDs(dst, data)
	}
	return decodeDecimalIDs(dst, data)
}

// decimalIDWidth is Decimal's MaxIDWidth.
const decimalIDWidth = 20

// appendDecimalIDs appends ids to dst as decimal numbers separated by
// newlines (no trailing newline).
func appendDecimalIDs(dst []byte, ids []uint64) []byte {
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, '\n')
		}
		dst = strconv.AppendUint(dst, id, 10)
	}
	return dst
}

// appendBinaryIDs appends ids to dst packed as 8 bytes big-endian each.
func appendBinaryIDs(dst []byte, ids []uint64) []byte {
	for _, id := range ids {
		dst = binary.BigEndian.AppendUint64(dst, id)
	}
	return dst
}

// decodeBinaryIDs appends the IDs packed in data (8 bytes big-endian
// each) to dst.
func decodeBinaryIDs(dst []uint64, data []byte) ([]uint64, error) {
	if len(data)%BinaryIDWidth != 0 {
		return dst, fmt.Errorf("protocol: binary batch reply of %d bytes is not a multiple of 8", len(data))
	}
	for i := 0; i < len(data); i += BinaryIDWidth {
		dst = append(dst, binary.BigEndian.Uint64(data[i:]))
	}
	return dst, nil
}

// decodeDecimalIDs appends the newline-separated decimal IDs in data to
// dst.
func decodeDecimalIDs(dst []uint64, data []byte) ([]uint64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return dst, nil
	}
	for line := range strings.SplitSeq(s, "\n") {
		id, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return dst, fmt.Errorf("protocol: batch reply line %q is not a decimal ID", quote.Shorten(line, 40))
		}
		dst = append(dst, id)
	}
	return dst, nil
}
