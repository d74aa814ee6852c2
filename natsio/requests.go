package natsio

import (
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// The service's side of the protocol: reading request bodies and the
// largest batch a reply may carry. The constants and encodings both sides
// share are in natsio/protocol.

// DefaultMaxBatch is the largest count a batch request may ask for
// unless configured otherwise; the connection's max payload may cap it
// further (see maxBatchFor).
const DefaultMaxBatch = 100_000

// maxRequestBody bounds the body of a batch or parse request: a count
// or an ID never needs more than a few dozen bytes, even padded with
// whitespace.
const maxRequestBody = 64

// maxBatchFor returns the largest count a batch request may ask for when
// replies may be at most maxPayload bytes (the connection's max payload)
// and configured is the configured largest batch.
func maxBatchFor(configured int, maxPayload int64, enc protocol.Encoding) int {
	return int(min(int64(configured), maxPayload/int64(enc.MaxIDWidth())))
}

// parseCount reads the body of a batch request: a decimal count from 1 to
// max, surrounded by optional ASCII whitespace. Its errors are
// *ServiceError with code 400 and say what was wrong, quoting (a prefix
// of) the body.
func parseCount(body []byte, max int) (int, error) { return parseCountOf(body, max, "IDs") }

// parseCountOf is parseCount whose errors call what is counted unit
// ("numbers" for a sequence's batch).
func parseCountOf(body []byte, max int, unit string) (int, error) {
	s, err := decimalBody(body, "count", "a decimal count of "+unit+", such as 100")
	if err != nil {
		return 0, err
	}
	n, negative, fits := parseDecimal(s)
	switch {
	case n == 0 && !fits:
		return 0, badRequest("count %q is not a decimal number", s)
	case negative && n != 0:
		return 0, badRequest("count %s is negative: ask for 1 to %d %s", s, max, unit)
	case n == 0 && fits:
		return 0, badRequest("count is 0: ask for 1 to %d %s", max, unit)
	case !fits || n > uint64(max):
		return 0, badRequest("count %s is too large: at most %d %s per batch request", s, max, unit)
	}
	return int(n), nil
}

// parseIDRequest reads the body of a parse request: one decimal ID,
// surrounded by optional ASCII whitespace. Its errors are *ServiceError
// with code 400.
func parseIDRequest(body []byte) (uint64, error) {
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
