package uidcore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksOnlyTheStandardLibrary: the algorithm links the standard
// library and the packages it is allowed beside it, themselves standard
// library only: internal/setting (the setting error every library shares)
// and telemetry/event (the names of lifecycle events).
func TestLinksOnlyTheStandardLibrary(t *testing.T) {
	const self = testdeps.Module + "uidcore"
	allowed := []string{self, testdeps.Module + "internal/setting", testdeps.Module + "telemetry/event"}
	deps := testdeps.Deps(t, self)
	for _, pkg := range deps {
		if first, _, _ := strings.Cut(pkg, "/"); strings.Contains(first, ".") && !slices.Contains(allowed, pkg) {
			t.Errorf("uidcore links %s", pkg)
		}
	}
	if !slices.Contains(deps, testdeps.Module+"internal/setting") {
		t.Errorf("go list -deps misses internal/setting: %v", deps)
	}
}
