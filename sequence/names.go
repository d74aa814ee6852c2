package sequence

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxNameLen bounds a sequence name: it is a NATS subject token, a KV key
// part and a MySQL VARCHAR(64) key.
const MaxNameLen = 64

// DefaultFirst is the first number of a sequence declared without one.
const DefaultFirst = 1

// Declaration is one sequence to declare: its name and first number.
type Declaration struct {
	Name  string
	First uint64
}

// ValidName reports why name cannot be a sequence name: names are one
// NATS subject token of letters, digits, '-' and '_', so that plain
// subject permissions (uid.seq.orders.>) can grant one name.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("empty sequence name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("sequence name %q is longer than %d bytes", name[:MaxNameLen]+"...", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("sequence name %q: use letters, digits, - and _ only", name)
		}
	}
	return nil
}

// ParseDeclarations reads a comma-separated list of name[=first], such as
// "orders,invoices=1000000" (spaces around items allowed). An empty string
// declares nothing; a name given twice is an error.
func ParseDeclarations(s string) ([]Declaration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Declaration
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		name, first, hasFirst := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if err := ValidName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("sequence %q declared twice", name)
		}
		seen[name] = true
		d := Declaration{Name: name, First: DefaultFirst}
		if hasFirst {
			v, err := strconv.ParseUint(strings.TrimSpace(first), 10, 64)
			if err != nil || v > MaxValue {
				return nil, fmt.Errorf("sequence %q: first number %q is not a decimal from 0 to %d", name, shortQuote(first), uint64(MaxValue))
			}
			d.First = v
		}
		out = append(out, d)
	}
	return out, nil
}

func shortQuote(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}
