package dispenser

import (
	"io"
	"text/template"
)

// referenceFormat renders the variables as the Markdown table of
// docs/configuration.md.
var referenceFormat = template.Must(template.New("reference").Parse(`# Configuration reference

Generated from the dispenser's configuration by ` + "`make docs`" + `; a test keeps it
current. ` + "`dispenser -h`" + ` prints the same list. An invalid value stops start-up
with a message naming the variable, and so does a configuration that could
not issue IDs for ` + "`DISPENSER_RUNWAY_WARNING`" + `. Only these variables are read
(never their names without the prefix); any other ` + "`DISPENSER_*`" + ` variable is
ignored with a warning at start that names the closest one ("did you mean
` + "`DISPENSER_MAX_LANES`" + `?"). Durations take a unit (` + "`30s`" + `, ` + "`1m30s`" + `), booleans are
` + "`true`" + ` or ` + "`false`" + `, and ` + "`DISPENSER_EPOCH`" + ` is RFC 3339 or a plain date (midnight
UTC). The OpenTelemetry exporters also
follow the standard ` + "`OTEL_*`" + ` variables (see [observability.md](observability.md)).

| variable | type | default | meaning |
|---|---|---|---|
{{range .}}| ` + "`{{.Name}}`" + ` | {{.Type}} | {{with .Default}}` + "`{{.}}`" + `{{end}} | {{.Description}} |
{{end}}`))

// WriteReference writes docs/configuration.md: every variable with its
// type, default and meaning.
func WriteReference(w io.Writer) error { return referenceFormat.Execute(w, Variables()) }
