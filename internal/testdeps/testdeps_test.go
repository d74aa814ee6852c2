package testdeps

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the failures Check reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCheckReportsWhatIsForbiddenAndMissing: Check fails on a package that
// links the server side (testenv embeds nats-server and opens MySQL) and
// on a wanted package that is not linked, and not on an exact entry's
// longer namesakes.
func TestCheckReportsWhatIsForbiddenAndMissing(t *testing.T) {
	r := &recorder{TB: t}
	deps := Check(r, Module+"internal/testenv", append([]string{Module + "internal/testwai"}, ServerSide...), []string{"no/such/package"})
	got := strings.Join(r.errors, "\n")
	for _, want := range []string{"links github.com/nats-io/nats-server/v2/server", "links github.com/go-sql-driver/mysql", "misses no/such/package"} {
		if !strings.Contains(got, want) {
			t.Errorf("Check reported %q; want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "internal/testwait") {
		t.Errorf("an exact entry matched a longer name: %s", got)
	}
	if len(deps) < 100 {
		t.Errorf("%d packages listed for testenv", len(deps))
	}
}
