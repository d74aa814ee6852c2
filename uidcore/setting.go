package uidcore

// SettingError is a setting a configuration struct cannot take, named by
// its field: the one error type of every library's configuration
// (uidcore's Layout and CachedOptions, sequence.Config, workerid.Config
// and the stores' mysqlstore.Config and kvstore.Config,
// natsio.BlocksConfig, telemetry.Config), so that a program can find the
// setting behind any of them with one errors.As and name it its own way
// (the dispenser names its environment variable). It lives here because
// uidcore, which imports only the standard library, is the package every
// other one imports.
type SettingError struct {
	Field  string // the struct's field, e.g. SeqBits, PaddingFactor, LeaseTTL
	Reason string
	Err    error // the cause, when one exists (a listen error, …)
}

func (e *SettingError) Error() string { return e.Field + ": " + e.Detail() }

// Detail is the reason and the cause, without the field: what a program
// that names the setting its own way puts after that name.
func (e *SettingError) Detail() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *SettingError) Unwrap() error { return e.Err }

// LayoutError is the SettingError of a Layout: Field is TimeBits,
// WorkerBits, SeqBits, Epoch, or Layout for their sum.
type LayoutError = SettingError
