package natsio

import (
	"regexp"
	"strings"
)

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidQueueGroup says whether g is a queue group name.
func ValidQueueGroup(g string) bool { return tokenPattern.MatchString(g) }

func ValidSubjectPrefix(p string) bool {
	if p == "" {
		return false
	}
	for tok := range strings.SplitSeq(p, ".") {
		if !tokenPattern.MatchString(tok) {
			return false
		}
	}
	return true
}
