// Package setting is the error a library returns about one field of its
// configuration struct. Libraries name their fields, not environment
// variables (only the dispenser reads the environment); one type for all
// of them lets the program that owns the configuration name its own
// variable for any library's error with one errors.As. The type is
// uidcore's (uidcore imports only the standard library, so it cannot
// import this package); this alias is how the other libraries spell it.
package setting

import "github.com/uid-dispenser/uid-dispenser/uidcore"

// Error is a setting a library cannot use, named by its field. Each
// library exports it as its SettingError.
type Error = uidcore.SettingError
