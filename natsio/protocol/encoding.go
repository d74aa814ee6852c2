package protocol

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
)

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
	if len(data)%BinaryIDWidth != 0 {
		return dst, fmt.Errorf("natsio: binary batch reply of %d bytes is not a multiple of 8", len(data))
	}
	for i := 0; i < len(data); i += BinaryIDWidth {
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
			return dst, fmt.Errorf("natsio: batch reply line %q is not a decimal ID", quote.Shorten(line, 40))
		}
		dst = append(dst, id)
	}
	return dst, nil
}
