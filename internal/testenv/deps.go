package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the packages pkg links (go list -deps, standard library
// included), for tests that keep a package's imports light.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the dependencies of %s: %v", pkg, err)
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
