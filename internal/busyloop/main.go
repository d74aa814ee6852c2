// Command busyloop keeps one core busy until it is killed: the load under
// which `make test` must still pass (README, "A failing suite does not
// stop the others"), where stress-ng is not installed.
package main

import "os"

func main() {
	// A counter the loop reads back, so that the compiler keeps the work.
	for n := uint64(1); n != 0; n++ {
	}
	os.Exit(0) // after 2^64 increments: never, in practice
}
