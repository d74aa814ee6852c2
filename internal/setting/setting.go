// Package setting is the error a library returns about one field of its
// configuration struct. Libraries name their fields, not environment
// variables (only the dispenser reads the environment); one type for all
// of them lets the program that owns the configuration name its own
// variable for any library's error with one errors.As.
package setting

// Error is a setting a library cannot use, named by its field. Each
// library exports it as its SettingError.
type Error struct {
	Field  string // the configuration struct's field, e.g. LeaseTTL
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
