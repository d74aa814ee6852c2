package sequence_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

func TestParseDeclarations(t *testing.T) {
	got, err := sequence.ParseDeclarations(" orders, invoices=1000000 ,short-ids_2=0")
	want := []sequence.Declaration{{"orders", 1}, {"invoices", 1000000}, {"short-ids_2", 0}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseDeclarations = %v, %v; want %v", got, err, want)
	}
	if got, err := sequence.ParseDeclarations("  "); err != nil || got != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for in, wantErr := range map[string]string{
		"orders,,invoices":           "empty sequence name",
		"orders,orders=5":            `"orders" declared twice`,
		"a.b":                        `"a.b": use letters`,
		"or*ders":                    "use letters",
		"orders=-1":                  `first number "-1"`,
		"orders=9223372036854775808": "not a decimal from 0 to 9223372036854775807",
		"orders=x":                   `first number "x"`,
		strings.Repeat("a", 65):      "longer than 64",
	} {
		if _, err := sequence.ParseDeclarations(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseDeclarations(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}

// FuzzParseDeclarations: whatever the input, either an error or
// declarations whose names are valid, distinct subject tokens and whose
// first numbers fit; and printing them back parses to the same.
func FuzzParseDeclarations(f *testing.F) {
	for _, s := range []string{"orders", "orders,invoices=1000000", "a=0, b = 7", "a,a", "x.y", "=", ",", "a=18446744073709551615", "ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		decls, err := sequence.ParseDeclarations(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		var parts []string
		for _, d := range decls {
			if sequence.ValidName(d.Name) != nil || seen[d.Name] || strings.ContainsAny(d.Name, ".*> \t") || d.First > sequence.MaxValue {
				t.Fatalf("%q gave the bad declaration %+v", s, d)
			}
			seen[d.Name] = true
			parts = append(parts, d.Name+"="+strconv.FormatUint(d.First, 10))
		}
		again, err := sequence.ParseDeclarations(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, decls) {
			t.Fatalf("%q: printed back, %v, %v", s, again, err)
		}
	})
}

// TestLinksOnlyTheStandardLibrary: the algorithm knows no store client,
// no NATS, no database driver. uidcore, itself only the standard library,
// is allowed for the setting error every library shares.
func TestLinksOnlyTheStandardLibrary(t *testing.T) {
	const self = "github.com/uid-dispenser/uid-dispenser/sequence"
	deps := testdeps.Deps(t, self)
	for _, pkg := range deps {
		if first, _, _ := strings.Cut(pkg, "/"); strings.Contains(first, ".") && pkg != self && pkg != "github.com/uid-dispenser/uid-dispenser/uidcore" {
			t.Errorf("sequence links %s", pkg)
		}
	}
	if !slices.Contains(deps, "sync") {
		t.Errorf("go list -deps misses sync: %v", deps)
	}
}
