package dispenser

// Reading Config from the environment, and the list of its variables.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// processEnv decodes the DISPENSER_* variables into cfg with envconfig;
// a field whose variable is unset keeps its value.
//
// Config's tags carry the whole name, prefix included, and the prefix
// given to envconfig is empty. envconfig (v1.4.0) falls back to a
// tagged field's bare tag when the prefixed name is unset (with the tag
// MYSQL_DSN and the prefix DISPENSER it would read MYSQL_DSN, meant for
// another program in the same container); with the whole name as the tag
// the fallback reads that same name again, so only DISPENSER_* is ever
// read.
func processEnv(cfg *Config) error {
	if err := envconfig.Process("", cfg); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return &ConfigError{Var: pe.KeyName, Reason: parseReason(pe)}
		}
		return err
	}
	return nil
}

// parseReason says what a value that does not decode should look like:
// envconfig's own error is Go's (strconv.ParseBool, "missing unit in
// duration").
func parseReason(pe *envconfig.ParseError) string {
	want := ""
	switch pe.TypeName {
	case "time.Duration":
		want = "a duration with a unit, e.g. 30s, 1m30s or 500ms (units ns, us, ms, s, m, h)"
	case "bool":
		want = "true or false"
	case "int", "int64":
		want = "a whole number, e.g. 4"
	case "uint", "uint64":
		want = "a whole number, 0 or more, e.g. 4"
	default:
		// Our own types (Instant) say what they want themselves.
		return fmt.Sprintf("%q: %v", pe.Value, pe.Err)
	}
	return fmt.Sprintf("%q is not %s", pe.Value, want)
}

// Instant is a point in time as a variable gives it: RFC 3339
// (2026-01-01T00:00:00Z, any offset) or a plain date, read as midnight
// UTC (2026-01-01).
type Instant struct{ time.Time }

// UnmarshalText reads an RFC 3339 time or a plain date.
func (i *Instant) UnmarshalText(b []byte) error {
	t, err := ParseInstant(string(b))
	if err != nil {
		return err
	}
	i.Time = t
	return nil
}

// String is the instant in RFC 3339, UTC: what the variable would be set
// to.
func (i Instant) String() string { return i.UTC().Format(time.RFC3339) }

// ParseInstant reads an RFC 3339 time or a plain date (midnight UTC).
func ParseInstant(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t, err = time.Parse(time.DateOnly, s)
	}
	if err != nil {
		return time.Time{}, errors.New("not a time: use RFC 3339, e.g. 2026-01-01T00:00:00Z, or a date, e.g. 2026-01-01 (midnight UTC)")
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		// An offset can carry 9999-12-31 into year 10000, which RFC 3339
		// (and so Instant's String) cannot write.
		return time.Time{}, fmt.Errorf("%s is outside years 0000..9999 in UTC: use RFC 3339, e.g. 2026-01-01T00:00:00Z", s)
	}
	return t, nil
}

// Variable is one configuration variable.
type Variable struct {
	Name        string // e.g. DISPENSER_LEASE_TTL
	Field       string // Config's field, e.g. LeaseTTL
	Type        string // as envconfig names it: Duration, Integer, True or False...
	Default     string // DefaultConfig's value as the variable would say it; "" for an empty string
	Description string
}

// variableFormat is how Variables reads Config's fields from envconfig's
// usage: one line per variable, its parts separated by tabs (descriptions
// and defaults hold none).
const variableFormat = "{{range .}}{{usage_key .}}\t{{.Name}}\t{{usage_type .}}\t{{printf \"%v\" .Field}}\t{{usage_description .}}\n{{end}}"

// Variables lists every variable the dispenser reads, in Config's order,
// with its default: the one list that `dispenser -h`,
// docs/configuration.md, the unknown-variable warning and the compose
// test are made from or checked against. It is Config's fields with their tags, as envconfig lists them
// (its usage template), so the list is the decoder's own.
func Variables() []Variable {
	cfg := DefaultConfig()
	var buf bytes.Buffer
	if err := envconfig.Usagef("", &cfg, &buf, variableFormat); err != nil {
		panic("dispenser: listing the configuration: " + err.Error()) // Config is a struct: cannot happen
	}
	var vars []Variable
	for sc := bufio.NewScanner(&buf); sc.Scan(); {
		p := strings.Split(sc.Text(), "\t")
		if len(p) != 5 {
			panic(fmt.Sprintf("dispenser: configuration line %q: a description or default holds a tab", sc.Text()))
		}
		vars = append(vars, Variable{Name: p[0], Field: p[1], Type: p[2], Default: formatDefault(p[2], p[3]), Description: p[4]})
	}
	return vars
}

// formatDefault writes a default value as a variable would be set to it
// (LoadConfig reads it back to the same value; a test holds it to that):
// 1m rather than Go's 1m0s, 1h rather than 1h0m0s.
func formatDefault(typ, v string) string {
	if typ == "Duration" {
		if strings.HasSuffix(v, "m0s") {
			v = strings.TrimSuffix(v, "0s")
		}
		if strings.HasSuffix(v, "h0m") {
			v = strings.TrimSuffix(v, "0m")
		}
	}
	return v
}

// usageFormat lists each variable with its type, default and description.
var usageFormat = template.Must(template.New("usage").Parse(`The dispenser is configured through the environment:
{{range .}}
  {{.Name}} ({{.Type}}{{if .Default}}, default {{.Default}}{{end}})
      {{.Description}}{{end}}
`))

// Usage writes every configuration variable with its default to w.
func Usage(w io.Writer) error { return usageFormat.Execute(w, Variables()) }

// UnknownVariable is a DISPENSER_* variable of the environment that the
// dispenser does not read, with the closest one it does read when that is
// close enough to be a misspelling.
type UnknownVariable struct {
	Name       string // e.g. DISPENSER_MAXLANES
	DidYouMean string // e.g. DISPENSER_MAX_LANES; "" when none is close
}

func (u UnknownVariable) String() string {
	if u.DidYouMean != "" {
		return u.Name + " is not a dispenser setting and is ignored; did you mean " + u.DidYouMean + "?"
	}
	return u.Name + " is not a dispenser setting and is ignored (dispenser -h lists the settings)"
}

// UnknownVariables lists the DISPENSER_* variables of environ (as
// os.Environ gives it) that the dispenser does not read, sorted: a
// variable ignored in silence would leave the operator believing a
// setting applied.
func UnknownVariables(environ []string) []UnknownVariable {
	vars := Variables()
	known := make(map[string]bool, len(vars))
	for _, v := range vars {
		known[v.Name] = true
	}
	var unknown []UnknownVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") && !known[name] {
			unknown = append(unknown, UnknownVariable{Name: name, DidYouMean: closestVariable(name, vars)})
		}
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Name < unknown[j].Name })
	return unknown
}

// UnknownEnvironment is UnknownVariables of the process's environment.
func UnknownEnvironment() []UnknownVariable { return UnknownVariables(os.Environ()) }

// WarnUnknown logs a warning for each unknown variable.
func WarnUnknown(log *slog.Logger, unknown []UnknownVariable) {
	for _, u := range unknown {
		if u.DidYouMean != "" {
			log.Warn("unknown variable ignored: did you mean "+u.DidYouMean+"?", "variable", u.Name)
		} else {
			log.Warn("unknown variable ignored: not a dispenser setting (dispenser -h lists them)", "variable", u.Name)
		}
	}
}

// closestVariable is the known variable nearest to name by edit distance
// (case and underscores ignored, so MAXLANES meets MAX_LANES at 0), when
// it is within a third of the name's length past the prefix; else "".
func closestVariable(name string, vars []Variable) string {
	squash := func(s string) string {
		return strings.ReplaceAll(strings.ToUpper(strings.TrimPrefix(s, EnvPrefix+"_")), "_", "")
	}
	want := squash(name)
	best, bestDist := "", len(want)/3+1
	for _, v := range vars {
		if d := editDistance(want, squash(v.Name)); d < bestDist {
			best, bestDist = v.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (variable names are ASCII).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
