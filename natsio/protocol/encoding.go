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
// Each encoding is one case in each method below: a new one is a
// constant, its header value, its widest ID, and an append and a decode
// function.
type Encoding uint8

const (
	// Decimal is newline-separated decimal ASCII without a trailing
	// newline: the default, when the request has no EncodingHeader.
	Decimal Encoding = iota
	// Binary is 8 bytes big-endian per ID, no separator
	// (EncodingHeader: EncodingBinary).
	Binary
	// Base32 is newline-separated Crockford base32, Base32Width
	// characters per ID, no trailing newline (EncodingHeader:
	// EncodingBase32): text that sorts as the numbers and that languages
	// without 64-bit integers keep as strings.
	Base32
	// Ranges is the batch as runs of consecutive IDs, in increasing order,
	// 16 bytes per run: the first ID, then the count, each 8 bytes
	// big-endian (EncodingHeader: EncodingRanges; see Run). A batch of one
	// worker ID in one second is one run, whatever its size, so its count
	// is bounded by what the instance can issue, not by the payload.
	Ranges
)

// UnknownEncodingError is the error of RequestEncoding for an
// EncodingHeader value that names no encoding. Answered as a 400: a
// misspelt value must not silently get text.
type UnknownEncodingError struct{ Value string }

func (e *UnknownEncodingError) Error() string {
	return fmt.Sprintf("%s %q is not an encoding: send %s, %s or %s, or no header for decimal", EncodingHeader, quote.Shorten(e.Value, 40), EncodingBinary, EncodingBase32, EncodingRanges)
}

// RequestEncoding is the encoding a request's headers ask for: Decimal
// without an EncodingHeader (or with an empty one), or the one it names.
// The header's name and value are matched without regard to case: clients
// in other languages may lower-case them. Any other value is an
// *UnknownEncodingError.
func RequestEncoding(h map[string][]string) (Encoding, error) {
	v := strings.TrimSpace(HeaderCarrier(h).Get(EncodingHeader))
	switch {
	case v == "":
		return Decimal, nil
	case strings.EqualFold(v, EncodingBinary):
		return Binary, nil
	case strings.EqualFold(v, EncodingBase32):
		return Base32, nil
	case strings.EqualFold(v, EncodingRanges):
		return Ranges, nil
	}
	return Decimal, &UnknownEncodingError{Value: v}
}

// HeaderValue is the EncodingHeader value that asks for e ("" for the
// default, which needs no header).
func (e Encoding) HeaderValue() string {
	switch e {
	case Binary:
		return EncodingBinary
	case Base32:
		return EncodingBase32
	case Ranges:
		return EncodingRanges
	}
	return ""
}

// String names the encoding for messages.
func (e Encoding) String() string {
	if v := e.HeaderValue(); v != "" {
		return v
	}
	return "decimal"
}

// MaxIDWidth is the most bytes one ID takes in a reply of encoding e,
// separator included, which bounds the IDs a reply of a given size holds:
// 8 binary; 20 decimal (19 digits, an ID never has the sign bit, and a
// newline); 14 base32 (13 characters and a newline); 16 ranges, a run of
// one ID (a batch of consecutive IDs takes 16 bytes whatever its size).
func (e Encoding) MaxIDWidth() int {
	switch e {
	case Binary:
		return BinaryIDWidth
	case Ranges:
		return RangeWidth
	case Base32:
		return Base32Width + 1
	}
	return decimalIDWidth
}

// Append appends ids to dst in encoding e.
func (e Encoding) Append(dst []byte, ids []uint64) []byte {
	switch e {
	case Binary:
		return appendBinaryIDs(dst, ids)
	case Base32:
		return appendTextIDs(dst, ids, AppendBase32)
	case Ranges:
		return appendRangesIDs(dst, ids)
	}
	return appendTextIDs(dst, ids, appendDecimal)
}

// Decode appends the IDs of a reply in encoding e to dst. Its error says
// what in data does not decode, quoting at most a few dozen bytes of it.
func (e Encoding) Decode(dst []uint64, data []byte) ([]uint64, error) {
	switch e {
	case Binary:
		return decodeBinaryIDs(dst, data)
	case Base32:
		return decodeTextIDs(dst, data, ParseBase32)
	case Ranges:
		return decodeRangesIDs(dst, data)
	}
	return decodeTextIDs(dst, data, parseDecimalLine)
}

// decimalIDWidth is Decimal's MaxIDWidth.
const decimalIDWidth = 20

// appendDecimal appends id in decimal.
func appendDecimal(dst []byte, id uint64) []byte { return strconv.AppendUint(dst, id, 10) }

// parseDecimalLine reads one line of a decimal reply.
func parseDecimalLine(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("protocol: batch reply line %q is not a decimal ID", quote.Shorten(s, 40))
	}
	return id, nil
}

// appendTextIDs appends ids to dst, each as appendID writes it, separated
// by newlines (no trailing newline).
func appendTextIDs(dst []byte, ids []uint64, appendID func([]byte, uint64) []byte) []byte {
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, '\n')
		}
		dst = appendID(dst, id)
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

// decodeTextIDs appends the newline-separated IDs in data, each read by
// parseID, to dst.
func decodeTextIDs(dst []uint64, data []byte, parseID func(string) (uint64, error)) ([]uint64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return dst, nil
	}
	for line := range strings.SplitSeq(s, "\n") {
		id, err := parseID(strings.TrimSpace(line))
		if err != nil {
			return dst, err
		}
		dst = append(dst, id)
	}
	return dst, nil
}
