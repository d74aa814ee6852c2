// Command docgen writes docs/configuration.md from the dispenser's
// configuration, so the operator's reference never drifts from the code.
package main

import (
	"fmt"
	"os"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
)

func main() {
	f, err := os.Create("docs/configuration.md")
	if err == nil {
		err = dispenser.WriteReference(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}
