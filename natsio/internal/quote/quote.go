// Package quote bounds what error messages quote of a peer's bytes (a
// reply, a header), so that a malformed message cannot make an error,
// or a log line, as large as itself.
package quote

// Shorten cuts s to at most n bytes, marking the cut with "...".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
