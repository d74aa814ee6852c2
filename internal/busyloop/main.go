// Command busyloop keeps one core busy until it is killed: the load under
// which `make test` must still pass (README, "A failing suite does not
// stop the others"), where stress-ng is not installed.
package main

// spins is a package variable, so the loop is not an empty one.
var spins uint64

func main() {
	for {
		spins++
	}
}
