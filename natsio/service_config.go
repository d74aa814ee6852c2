package natsio

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// Validate reports the first setting NewService would refuse, as a
// *setting.Error naming its field; zero settings read as their defaults.
func (cfg ServiceConfig) Validate() error {
	switch {
	case cfg.QueueGroup != "" && !tokenPattern.MatchString(cfg.QueueGroup):
		return &setting.Error{Field: "QueueGroup", Reason: fmt.Sprintf("%q: use letters, digits, - and _", cfg.QueueGroup)}
	case cfg.SubjectPrefix != "" && !validSubjectPrefix(cfg.SubjectPrefix):
		return &setting.Error{Field: "SubjectPrefix", Reason: fmt.Sprintf("%q is not a subject prefix (tokens of letters, digits, - and _ separated by dots)", cfg.SubjectPrefix)}
	case cfg.MaxBatch < 0:
		return &setting.Error{Field: "MaxBatch", Reason: fmt.Sprintf("%d: at least 1", cfg.MaxBatch)}
	}
	return nil
}

// tokenPattern is a queue group, or one token of a subject prefix.
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validSubjectPrefix(p string) bool {
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
