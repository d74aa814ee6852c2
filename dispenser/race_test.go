//go:build race

package dispenser

// raceEnabled: the race detector makes sync.Pool drop what is put in it
// at random, so a regexp allocates a matcher now and then.
const raceEnabled = true
