// Package setting is the error a library returns about one field of its
// configuration struct: the one type of uidcore's Layout and
// CachedOptions, sequence.Config, workerid.Config and the stores'
// mysqlstore.Config and kvstore.Config, natsio.BlocksConfig and
// telemetry.Config. Libraries name their fields, not environment
// variables (only the dispenser reads the environment); one type for all
// of them lets the program that owns the configuration find the setting
// behind any of them with one errors.As and name it its own way (the
// dispenser names its variable, by its table of settings).
//
// It imports only the standard library, so that uidcore, which is held to
// the standard library, can return it.
package setting

// Error is a setting a configuration struct cannot take, named by its
// field.
type Error struct {
	Field  string // the struct's field, e.g. SeqBits, PaddingFactor, LeaseTTL
	Reason string
	Err    error // the cause, when one exists (a listen error, …)
}

func (e *Error) Error() string { return e.Field + ": " + e.Detail() }

// Detail is the reason and the cause, without the field: what a program
// that names the setting its own way puts after that name.
func (e *Error) Detail() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }
