package dispenser

// Reading Config from the environment, and the list of its variables.

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/template"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// processEnv is envconfig.Process(EnvPrefix, cfg) without envconfig's
// fallback to a variable's unprefixed name (it reads the tag MYSQL_DSN
// from MYSQL_DSN when DISPENSER_MYSQL_DSN is unset), through which a
// MYSQL_DSN or LOG_LEVEL meant for another program in the same container
// would configure the dispenser. envconfig skips the fallback when a tag
// is the whole name, so the leaf fields are processed as one flat struct
// whose tags carry the prefix, then copied back: the same parsing, only
// DISPENSER_* read. A field whose variable is unset keeps its value.
func processEnv(cfg *Config) error {
	leaves, flat := flatten(cfg)
	if err := envconfig.Process("", flat.Addr().Interface()); err != nil {
		return err
	}
	for i, leaf := range leaves {
		leaf.Set(flat.Field(i))
	}
	return nil
}

// flatten lists cfg's leaf fields, nested structs walked, and returns a
// flat struct holding their values whose tags carry the prefixed names.
func flatten(cfg *Config) (leaves []reflect.Value, flat reflect.Value) {
	var fields []reflect.StructField
	var collect func(v reflect.Value)
	collect = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Anonymous {
				collect(v.Field(i))
				continue
			}
			name := f.Tag.Get("envconfig")
			if name == "" {
				panic("dispenser: configuration field " + f.Name + " has no envconfig tag")
			}
			tag := strings.Replace(string(f.Tag), `envconfig:"`+name+`"`, `envconfig:"`+EnvPrefix+"_"+name+`"`, 1)
			leaves = append(leaves, v.Field(i))
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", len(fields)), Type: f.Type, Tag: reflect.StructTag(tag)})
		}
	}
	collect(reflect.ValueOf(cfg).Elem())
	flat = reflect.New(reflect.StructOf(fields)).Elem()
	for i, leaf := range leaves {
		flat.Field(i).Set(leaf)
	}
	return leaves, flat
}

// Variable is one configuration variable.
type Variable struct {
	Name        string // e.g. DISPENSER_LEASE_TTL
	Type        string // as envconfig names it: Duration, Integer, True or False...
	Default     string // DefaultConfig's value as the variable would say it; "" for an empty string
	Description string
}

// Variables lists every variable the dispenser reads, in Config's order,
// with its default: the one list that `dispenser -h`, docs/configuration.md
// and the compose test are made from or checked against.
func Variables() []Variable {
	cfg := DefaultConfig()
	leaves, flat := flatten(&cfg)
	vars := make([]Variable, len(leaves))
	for i, leaf := range leaves {
		f := flat.Type().Field(i)
		vars[i] = Variable{Name: f.Tag.Get("envconfig"), Type: typeName(f.Type), Default: formatDefault(leaf), Description: f.Tag.Get("desc")}
	}
	return vars
}

// typeName names a variable's type as envconfig's usage does.
func typeName(t reflect.Type) string {
	switch {
	case t.PkgPath() != "": // time.Duration, time.Time, workerid.Mode
		return t.Name()
	case t.Kind() == reflect.Bool:
		return "True or False"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "Integer"
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return "Unsigned Integer"
	}
	return "String"
}

// formatDefault writes a default value as a variable would be set to it
// (LoadConfig reads it back to the same value; a test holds it to that).
func formatDefault(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		// 1m rather than 1m0s, 1h rather than 1h0m0s.
		s := x.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	}
	return fmt.Sprint(v.Interface())
}

// usageFormat lists each variable with its type, default and description.
var usageFormat = template.Must(template.New("usage").Parse(`The dispenser is configured through the environment:
{{range .}}
  {{.Name}} ({{.Type}}{{if .Default}}, default {{.Default}}{{end}})
      {{.Description}}{{end}}
`))

// Usage writes every configuration variable with its default to w.
func Usage(w io.Writer) error { return usageFormat.Execute(w, Variables()) }
