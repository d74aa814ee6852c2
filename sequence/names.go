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

// Declaration is one sequence to declare: its name, first number and,
// in a fleet of regions, its home region (the region whose instances
// alone keep and serve it; "" without regions).
type Declaration struct {
	Name  string
	First uint64
	Home  string
}

// String is the declaration as ParseDeclarations reads it.
func (d Declaration) String() string {
	s := d.Name
	if d.Home != "" {
		s += "@" + d.Home
	}
	return s + "=" + strconv.FormatUint(d.First, 10)
}

// ValidName reports why name cannot be a sequence name: names are one
// NATS subject token of letters, digits, '-' and '_', so that plain
// subject permissions (uid.seq.orders.>) can grant one name.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("empty sequence name")
	}
	if err := validToken(name); err != nil {
		return fmt.Errorf("sequence name %w", err)
	}
	return nil
}

// validToken reports why s is not one subject token of letters, digits,
// '-' and '_' of at most MaxNameLen bytes: a name, or a home region.
func validToken(s string) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%q is longer than %d bytes", s[:MaxNameLen]+"...", MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%q: use letters, digits, - and _ only", s)
		}
	}
	return nil
}

// ParseDeclarations reads a comma-separated list of name[@home][=first],
// such as "orders,invoices=1000000" or "orders@east,invoices@west=1000000"
// (spaces around items allowed). A home is one token of the same
// characters as a name; whether it is a region of the fleet is the
// caller's to check. An empty string declares nothing; a name given twice
// is an error.
func ParseDeclarations(s string) ([]Declaration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Declaration
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		name, first, hasFirst := strings.Cut(item, "=")
		name, home, hasHome := strings.Cut(strings.TrimSpace(name), "@")
		name, home = strings.TrimSpace(name), strings.TrimSpace(home)
		if err := ValidName(name); err != nil {
			return nil, err
		}
		if hasHome && home == "" {
			return nil, fmt.Errorf("sequence %q: no home region after @", name)
		}
		if hasHome {
			if err := validToken(home); err != nil {
				return nil, fmt.Errorf("sequence %q: home region %q: %w", name, shortQuote(home), err)
			}
		}
		if seen[name] {
			return nil, fmt.Errorf("sequence %q declared twice", name)
		}
		seen[name] = true
		d := Declaration{Name: name, First: DefaultFirst, Home: home}
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
