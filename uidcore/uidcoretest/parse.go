package uidcoretest

import "testing"

// MustParse is parse(id), a layout's Parse (uidcore.Layout.Parse),
// failing the test when the ID does not parse: a check that ignores the
// error reads a zero Parts and may pass on it. Call it from the test's
// goroutine. It takes the method rather than the layout so that
// uidcoretest, which uidcore's own tests import, does not import uidcore.
func MustParse[P any](t testing.TB, parse func(uint64) (P, error), id uint64) P {
	t.Helper()
	p, err := parse(id)
	if err != nil {
		t.Fatalf("ID %d does not parse: %v", id, err)
	}
	return p
}
