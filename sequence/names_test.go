package sequence_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
	"github.com/uid-dispenser/uid-dispenser/sequence"
)

func TestParseDeclarations(t *testing.T) {
	got, err := sequence.ParseDeclarations(" orders, invoices=1000000 ,short-ids_2=0")
	want := []sequence.Declaration{{Name: "orders", First: 1}, {Name: "invoices", First: 1000000}, {Name: "short-ids_2", First: 0}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseDeclarations = %v, %v; want %v", got, err, want)
	}
	got, err = sequence.ParseDeclarations("orders@east, invoices @ west-2 = 1000000,refunds=7")
	want = []sequence.Declaration{{Name: "orders", First: 1, Home: "east"}, {Name: "invoices", First: 1000000, Home: "west-2"}, {Name: "refunds", First: 7}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseDeclarations with homes = %v, %v; want %v", got, err, want)
	}
	if got, err := sequence.ParseDeclarations("  "); err != nil || got != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for in, wantErr := range map[string]string{
		"orders,,invoices":                  "empty sequence name",
		"orders,orders=5":                   `"orders" declared twice`,
		"a.b":                               `"a.b": use letters`,
		"or*ders":                           "use letters",
		"orders=-1":                         `first number "-1"`,
		"orders=9223372036854775808":        "not a decimal from 0 to 9223372036854775807",
		"orders=x":                          `first number "x"`,
		strings.Repeat("a", 65):             "longer than 64",
		"orders@":                           `"orders": no home region after @`,
		"orders@=5":                         "no home region after @",
		"orders@east@west":                  `home region "east@west": "east@west": use letters`,
		"orders@ea.st":                      "use letters",
		"@east":                             "empty sequence name",
		"orders@east,orders@west":           `"orders" declared twice`,
		"orders@" + strings.Repeat("e", 65): "longer than 64",
	} {
		if _, err := sequence.ParseDeclarations(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseDeclarations(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}

// FuzzParseDeclarations: whatever the input, either an error or
// declarations whose names (and homes) are valid, distinct subject
// tokens and whose first numbers fit; and printing them back parses to
// the same.
func FuzzParseDeclarations(f *testing.F) {
	for _, s := range []string{"orders", "orders,invoices=1000000", "a=0, b = 7", "a,a", "x.y", "=", ",", "a=18446744073709551615", "ä",
		"orders@east", "orders@east=5,b@west", "a@", "a@b@c", "@", "a @ b = 1", "a@b=c@d"} {
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
			if sequence.ValidName(d.Name) != nil || seen[d.Name] || strings.ContainsAny(d.Name+d.Home, ".*>@= \t") || d.First > sequence.MaxValue ||
				d.Home != "" && sequence.ValidName(d.Home) != nil {
				t.Fatalf("%q gave the bad declaration %+v", s, d)
			}
			seen[d.Name] = true
			parts = append(parts, d.String())
		}
		again, err := sequence.ParseDeclarations(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, decls) {
			t.Fatalf("%q: printed back, %v, %v", s, again, err)
		}
	})
}

// TestLinksOnlyTheStandardLibrary: the algorithm knows no store client,
// no NATS, no database driver. The standard-library-only packages of the
// setting error every library shares and of the log events' names are
// allowed (and uidcore, itself only the standard library).
func TestLinksOnlyTheStandardLibrary(t *testing.T) {
	const module = "github.com/uid-dispenser/uid-dispenser/"
	const self = module + "sequence"
	allowed := []string{self, module + "uidcore", module + "internal/setting", module + "telemetry/event"}
	deps := testdeps.Deps(t, self)
	for _, pkg := range deps {
		if first, _, _ := strings.Cut(pkg, "/"); strings.Contains(first, ".") && !slices.Contains(allowed, pkg) {
			t.Errorf("sequence links %s", pkg)
		}
	}
	if !slices.Contains(deps, "sync") {
		t.Errorf("go list -deps misses sync: %v", deps)
	}
}
