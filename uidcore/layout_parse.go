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
// "uidgenerator") or as Layout.String writes it, "T/W/S@epoch": the epoch
// in RFC 3339, whose offset the layout keeps for messages, or a date,
// midnight UTC (UidGenerator's epochStr is one: 31/10/22@2026-01-01);
// without "@epoch" it is DefaultEpoch. The result is validated.
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
		return Layout{}, fmt.Errorf("layout %q: want a preset (%s) or time/worker/sequence bits such as 31/16/16, optionally @ an epoch (RFC 3339 or a date)", s, Presets)
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
		epoch, err := ParseEpoch(epochPart)
		if err != nil {
			return Layout{}, fmt.Errorf("layout %q: %w", s, err)
		}
		l.Epoch = epoch
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("layout %q: %w", s, err)
	}
	return l, nil
}

// IsPreset says whether s names a preset layout (PresetDefault,
// PresetJSSafe, PresetUidGenerator), in any case.
func IsPreset(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case PresetDefault, PresetUidGenerator, PresetJSSafe:
		return true
	}
	return false
}

// HasEpoch says whether a layout s says its epoch: a preset, or
// "T/W/S@epoch". A request that names a layout must say it; a bare
// "T/W/S" silently counting from DefaultEpoch reads a UidGenerator ID
// ten years off.
func HasEpoch(s string) bool { return IsPreset(s) || strings.Contains(s, "@") }

// ParseEpoch reads an epoch as RFC 3339 (2016-05-20T00:00:00+08:00) or as
// a date, midnight UTC (2016-05-20), the form of UidGenerator's epochStr.
func ParseEpoch(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("the epoch %q is neither an RFC 3339 time such as 2016-05-20T00:00:00+08:00 nor a date such as 2016-05-20 (midnight UTC)", s)
}
