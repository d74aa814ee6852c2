package sequencetest_test

import (
	"testing"

	"github.com/uid-dispenser/uid-dispenser/internal/testdeps"
)

// TestLinksNoServerSide: the conformance suite is for the authors of
// stores too; importing it must not pull in nats-server or the MySQL
// driver (it waits with internal/testwait, not internal/testenv).
func TestLinksNoServerSide(t *testing.T) {
	const module = testdeps.Module
	testdeps.Check(t, module+"sequence/sequencetest", append([]string{module + "internal/testenv"}, testdeps.ServerSide...),
		[]string{module + "sequence", module + "internal/testwait"})
}
