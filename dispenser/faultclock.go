//go:build faultclock

package dispenser

import (
	"os"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// FaultClockEnv names the offset file of the fault harness's clock
// (uidcore/faultclock.go). Only a build with the faultclock tag reads it.
const FaultClockEnv = "UID_FAULT_CLOCK_FILE"

func init() { uidcore.SetFaultClockFile(os.Getenv(FaultClockEnv)) }
