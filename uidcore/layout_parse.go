package uidcore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Layout presets by name, for ParseLayout.
const (
	PresetDefault      = "default"      // DefaultLayout
	PresetUidGenerator = "uidgenerator" // UidGeneratorLayout
	PresetJSSafe       = "jssafe"       // JSSafeLayout
)

// Presets lists the preset names ParseLayout knows, for messages.
const Presets = PresetDefault + ", " + PresetJSSafe + ", " + PresetUidGenerator

// ParseLayout reads a layout as a preset name ("default", "jssafe",
// "uidgenerator") or as Layout.String writes it, "T/W/S@epoch" (the epoch
// in RFC 3339, whose offset the layout keeps for messages; without
// "@epoch" it is DefaultEpoch). The result is validated.
func ParseLayout(s string) (Layout, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case PresetDefault:
		return DefaultLayout(), nil
	case PresetUidGenerator:
		return UidGeneratorLayout(), nil
	case PresetJSSafe:
		return JSSafeLayout(), nil
	}
	bitsPart, epochPart, hasEpoch := strings.Cut(strings.TrimSpace(s), "@")
	fields := strings.Split(bitsPart, "/")
	if len(fields) != 3 {
		return Layout{}, fmt.Errorf("layout %q: want a preset (%s) or time/worker/sequence bits such as 31/16/16, optionally @ an RFC 3339 epoch", s, Presets)
	}
	var bits [3]uint
	for i, f := range fields {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 8)
		if err != nil {
			return Layout{}, fmt.Errorf("layout %q: %q is not a number of bits", s, f)
		}
		bits[i] = uint(n)
	}
	l := Layout{TimeBits: bits[0], WorkerBits: bits[1], SeqBits: bits[2], Epoch: DefaultEpoch}
	if hasEpoch {
		epoch, err := time.Parse(time.RFC3339, strings.TrimSpace(epochPart))
		if err != nil {
			return Layout{}, fmt.Errorf("layout %q: the epoch %q is not an RFC 3339 time such as 2016-05-20T00:00:00+08:00", s, epochPart)
		}
		l.Epoch = epoch
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("layout %q: %w", s, err)
	}
	return l, nil
}
