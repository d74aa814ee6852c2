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

// idForm is how a parse request may write its ID.
type idForm struct {
	// base32: the request said Uid-Encoding: base32, so even a body of
	// digits only is base32.
	base32 bool
	// signed: a negative decimal is the signed long of an ID with the
	// sign bit set (UidGenerator's wrapped IDs; the request named a
	// layout), and the sign bit is allowed.
	signed bool
}

// parseIDRequest reads the body of a parse request: one ID, surrounded
// by optional ASCII whitespace, in decimal or in base32 (a body of 13
// characters with a letter, or any body when form.base32). Its errors
// are *ServiceError with code 400.
func parseIDRequest(body []byte, form idForm) (uint64, error) {
	s, err := decimalBody(body, "ID", "one decimal or base32 ID, such as 755486507050 or 00000NZK82G1A")
	if err != nil {
		return 0, err
	}
	if form.base32 || len(s) == protocol.Base32Width && strings.ContainsFunc(s, isLetter) {
		id, err := protocol.ParseBase32(s)
		if be, ok := err.(*protocol.Base32Error); ok {
			return 0, badRequest("%s", be.Problem())
		}
		if id>>63 != 0 && !form.signed {
			return 0, badRequest("ID %s (%d) has the sign bit set: no dispenser issues such IDs", s, id)
		}
		return id, err
	}
	id, negative, fits := parseDecimal(s)
	switch {
	case id == 0 && !fits:
		return 0, badRequest("ID %q is not a decimal number", s)
	case negative && id != 0 && !form.signed:
		return 0, badRequest("ID %s is negative", s)
	case negative && id != 0:
		if id > 1<<63 || !fits {
			return 0, badRequest("ID %s is below -2^63, the smallest signed 64-bit number", s)
		}
		return -id, nil // two's complement: the long's 64 bits
	case !fits:
		return 0, badRequest("ID %s does not fit in 64 bits", s)
	case id>>63 != 0 && !form.signed:
		return 0, badRequest("ID %d has the sign bit set: no dispenser issues such IDs", id)
	}
	return id, nil
}

// isLetter reports whether r is an ASCII letter.
func isLetter(r rune) bool { return r|0x20 >= 'a' && r|0x20 <= 'z' }

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
