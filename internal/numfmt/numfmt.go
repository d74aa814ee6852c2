// Package numfmt formats numbers for people reading reports: the
// client-demo load report and the generated benchmark tables share it so
// that both group digits the same way.
package numfmt

import (
	"strconv"
	"strings"
)

// Thousands writes n with a comma between groups of three digits
// (1234567 as 1,234,567). A negative n is written without separators.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
