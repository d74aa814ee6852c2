//go:build !race

package dispenser

const raceEnabled = false
