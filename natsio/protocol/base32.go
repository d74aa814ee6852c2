package protocol

import (
	"fmt"

	"github.com/uid-dispenser/uid-dispenser/natsio/internal/quote"
)

// Crockford base32 IDs: the form of the Base32 encoding, of parse request
// bodies, and of the clients' ToBase32 and FromBase32.
//
// The alphabet is Crockford's (digits, then the letters without I, L, O
// and U) in ASCII order, and every ID takes exactly Base32Width characters,
// zero-padded: so comparing the strings (bytewise, as a database or a
// JavaScript sort does) orders them as the numbers. 64 bits take 13
// characters: 4 bits in the first, 5 in each of the other 12.

// Base32Width is the number of characters of a base32 ID.
const Base32Width = 13

// base32Alphabet is Crockford's alphabet, upper case.
const base32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// base32Values maps a character to its value, or to 0xFF for one that is
// not base32. Lower case reads as upper case, and I and L read as 1, O as
// 0, as Crockford's decoders do.
var base32Values = func() (v [256]byte) {
	for i := range v {
		v[i] = 0xFF
	}
	for i := 0; i < len(base32Alphabet); i++ {
		c := base32Alphabet[i]
		v[c] = byte(i)
		if c >= 'A' && c <= 'Z' {
			v[c+'a'-'A'] = byte(i)
		}
	}
	for _, c := range "IiLl" {
		v[c] = 1
	}
	v['O'], v['o'] = 0, 0
	return v
}()

// AppendBase32 appends id to dst as Base32Width upper-case Crockford
// base32 characters.
func AppendBase32(dst []byte, id uint64) []byte {
	var b [Base32Width]byte
	for i := Base32Width - 1; i >= 0; i-- {
		b[i] = base32Alphabet[id&31]
		id >>= 5
	}
	return append(dst, b[:]...)
}

// FormatBase32 is id as a base32 string.
func FormatBase32(id uint64) string { return string(AppendBase32(nil, id)) }

// Base32Error is the error of ParseBase32: Text (a prefix of it) is not a
// base32 ID for Reason. The service answers it as a 400 with Problem.
type Base32Error struct {
	Text   string
	Reason string
}

func (e *Base32Error) Error() string { return "protocol: " + e.Problem() }

// Problem is the error without the package's name, as the service puts it
// in a reply.
func (e *Base32Error) Problem() string {
	return fmt.Sprintf("base32 ID %q %s", quote.Shorten(e.Text, 20), e.Reason)
}

// ParseBase32 reads a base32 ID: exactly Base32Width characters, in any
// case, I and L read as 1 and O as 0. Its error is a *Base32Error.
func ParseBase32(s string) (uint64, error) {
	if len(s) != Base32Width {
		return 0, &Base32Error{Text: s, Reason: fmt.Sprintf("has %d characters, not %d", len(s), Base32Width)}
	}
	var id uint64
	for i := 0; i < len(s); i++ {
		v := base32Values[s[i]]
		if v == 0xFF {
			return 0, &Base32Error{Text: s, Reason: fmt.Sprintf("has %q, not a Crockford base32 character (0-9 and A-Z without U)", s[i:i+1])}
		}
		id = id<<5 | uint64(v)
	}
	// The first character carries only 4 bits: 8 or more would need a
	// 65th.
	if base32Values[s[0]] > 15 {
		return 0, &Base32Error{Text: s, Reason: "is above 2^64-1 (its first character is at most F)"}
	}
	return id, nil
}
