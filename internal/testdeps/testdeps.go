// Package testdeps lists what a package links, for the tests that keep a
// package's imports light: the client, the client-side connection, the
// client programs and the public test kits must not link the server
// side. Standard library only, so that such a test does not itself link
// what it forbids.
package testdeps

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is this module's import path, with the trailing slash.
const Module = "github.com/uid-dispenser/uid-dispenser/"

// ServerSide are the server side's libraries: nats-server (the embedded
// server and the tests' servers) and the MySQL driver (the worker-ID
// and sequence stores).
var ServerSide = []string{"github.com/nats-io/nats-server/", "github.com/go-sql-driver/mysql"}

// Deps lists the packages pkg links (go list -deps, standard library
// included).
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

// Check lists what pkg links, fails t for each package that is one of
// forbidden or, for an entry ending in "/", lies under it, and for each of
// want that is missing (so that the list is known to be the real one),
// and returns the list.
func Check(t testing.TB, pkg string, forbidden, want []string) []string {
	t.Helper()
	deps := Deps(t, pkg)
	for _, d := range deps {
		for _, f := range forbidden {
			if d == strings.TrimSuffix(f, "/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
	for _, w := range want {
		if !slices.Contains(deps, w) {
			t.Errorf("go list -deps %s misses %s (%d packages listed)", pkg, w, len(deps))
		}
	}
	return deps
}
