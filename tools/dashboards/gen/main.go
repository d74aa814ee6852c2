// Command gen writes the Grafana dashboard that package dashboards builds
// (make dashboards).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/uid-dispenser/uid-dispenser/tools/dashboards"
)

func main() {
	out := flag.String("o", "../compose/grafana/uid-dispenser.json", "file to write")
	flag.Parse()
	b, err := dashboards.JSON()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
