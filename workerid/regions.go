package workerid

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Regions split one fleet's worker IDs between the clusters of a NATS
// supercluster: each region claims worker IDs only inside its own range,
// from a store of its own, so that regions never coordinate and never
// issue the same ID, even while the gateways between them are cut.
//
// The map is written name=lo-hi,…, e.g. east=0-511,west=512-1023; ranges
// are closed and must not overlap. Worker IDs no region has stay free
// for regions added later (see docs/operations.md, "Across regions").

// WorkerRange is the closed range [Lo, Hi] of worker IDs of a region.
type WorkerRange struct{ Lo, Hi uint64 }

// Len is the number of worker IDs in the range.
func (r WorkerRange) Len() uint64 { return r.Hi - r.Lo + 1 }

// Contains says whether workerID lies in the range.
func (r WorkerRange) Contains(workerID uint64) bool { return r.Lo <= workerID && workerID <= r.Hi }

func (r WorkerRange) String() string { return fmt.Sprintf("%d-%d", r.Lo, r.Hi) }

// Region is one region of a map: its name and worker-ID range.
type Region struct {
	Name  string
	Range WorkerRange
}

func (r Region) String() string { return r.Name + "=" + r.Range.String() }

// Regions is a fleet's map of regions to worker-ID ranges. The zero
// value is a fleet without regions: every instance may claim every
// worker ID of the layout, as before regions existed.
type Regions struct {
	list []Region // ascending Range.Lo, no overlaps
}

// RegionErrorKind says what is wrong with a map of regions.
type RegionErrorKind int

// The kinds of RegionError.
const (
	RegionMalformed    RegionErrorKind = iota + 1 // an entry is empty or not name=lo-hi
	RegionDuplicate                               // a name appears twice
	RegionOverlap                                 // two ranges share worker IDs
	RegionBeyondLayout                            // a range ends past the layout's largest worker ID
	RegionMissing                                 // the instance's region is not in the map
)

// RegionError is a map of regions that cannot be used, or an instance's
// region that is not in it. Callers branch on Kind with errors.As.
type RegionError struct {
	Kind   RegionErrorKind
	Entry  string // the entry or region concerned, as written
	Other  string // RegionOverlap, RegionDuplicate: the entry it clashes with
	Reason string
}

func (e *RegionError) Error() string {
	if e.Entry == "" {
		return "regions: " + e.Reason
	}
	return fmt.Sprintf("regions: %q: %s", e.Entry, e.Reason)
}

// regionNamePattern: a region's name becomes part of bucket and stream
// names and of metric labels, so it is kept to what all of them accept.
var regionNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// maxRegionsText bounds the text parsed (and recorded in the fleet
// record's column of 1,024 characters).
const maxRegionsText = 1024

// ParseRegions reads a map of regions, name=lo-hi entries separated by
// commas (spaces around them are ignored). An empty text is the zero
// Regions. Errors are *RegionError.
func ParseRegions(s string) (Regions, error) {
	if strings.TrimSpace(s) == "" {
		return Regions{}, nil
	}
	if len(s) > maxRegionsText {
		return Regions{}, &RegionError{Kind: RegionMalformed, Reason: fmt.Sprintf("%d characters, more than %d", len(s), maxRegionsText)}
	}
	var m Regions
	for entry := range strings.SplitSeq(s, ",") {
		r, err := parseRegion(strings.TrimSpace(entry))
		if err != nil {
			return Regions{}, err
		}
		for _, o := range m.list {
			if strings.EqualFold(o.Name, r.Name) {
				return Regions{}, &RegionError{Kind: RegionDuplicate, Entry: r.String(), Other: o.String(), Reason: "the region is named twice (names are compared without case)"}
			}
		}
		m.list = append(m.list, r)
	}
	slices.SortFunc(m.list, func(a, b Region) int { return compareUint(a.Range.Lo, b.Range.Lo) })
	for i := 1; i < len(m.list); i++ {
		if prev, cur := m.list[i-1], m.list[i]; cur.Range.Lo <= prev.Range.Hi {
			return Regions{}, &RegionError{Kind: RegionOverlap, Entry: cur.String(), Other: prev.String(),
				Reason: fmt.Sprintf("overlaps %s: two regions sharing a worker ID could issue the same ID", prev)}
		}
	}
	return m, nil
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseRegion reads one name=lo-hi entry.
func parseRegion(entry string) (Region, error) {
	bad := func(format string, args ...any) error {
		return &RegionError{Kind: RegionMalformed, Entry: entry, Reason: fmt.Sprintf(format, args...)}
	}
	if entry == "" {
		return Region{}, bad("empty entry: want name=lo-hi entries separated by commas, e.g. east=0-511,west=512-1023")
	}
	name, span, ok := strings.Cut(entry, "=")
	if !ok {
		return Region{}, bad("want name=lo-hi, e.g. east=0-511")
	}
	name = strings.TrimSpace(name)
	if !regionNamePattern.MatchString(name) {
		return Region{}, bad("region name %q: want letters, digits, _ and -, starting with a letter or digit, at most 32", name)
	}
	loText, hiText, ok := strings.Cut(strings.TrimSpace(span), "-")
	if !ok {
		return Region{}, bad("range %q: want lo-hi, two worker IDs, e.g. 0-511", span)
	}
	lo, err := parseWorkerID(loText)
	if err != nil {
		return Region{}, bad("range %q: %v", span, err)
	}
	hi, err := parseWorkerID(hiText)
	if err != nil {
		return Region{}, bad("range %q: %v", span, err)
	}
	if lo > hi {
		return Region{}, bad("range %q ends before it starts", span)
	}
	return Region{Name: name, Range: WorkerRange{Lo: lo, Hi: hi}}, nil
}

func parseWorkerID(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	// ParseUint alone would take "+5" (no) and "0x10" (not with base 10),
	// but be explicit: digits only.
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a worker ID (digits only)", s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a worker ID: %w", s, err)
	}
	return n, nil
}

// IsZero says whether the map is empty: a fleet without regions.
func (m Regions) IsZero() bool { return len(m.list) == 0 }

// List returns the regions in ascending order of their ranges.
func (m Regions) List() []Region { return slices.Clone(m.list) }

// String is the canonical text of the map (ascending ranges), as the
// fleet record keeps it: two maps with the same regions and ranges
// written in another order have the same String. "" for the zero map.
func (m Regions) String() string {
	parts := make([]string, len(m.list))
	for i, r := range m.list {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Range is the worker-ID range of the region called name; a region not
// in the map is a *RegionError of kind RegionMissing.
func (m Regions) Range(name string) (WorkerRange, error) {
	for _, r := range m.list {
		if r.Name == name {
			return r.Range, nil
		}
	}
	names := make([]string, len(m.list))
	for i, r := range m.list {
		names[i] = r.Name
	}
	reason := fmt.Sprintf("not in the map of regions %s (regions %s)", m, strings.Join(names, ", "))
	if name == "" {
		reason = fmt.Sprintf("no region given for this instance: with the map of regions %s, each instance must name its own", m)
	}
	return WorkerRange{}, &RegionError{Kind: RegionMissing, Entry: name, Reason: reason}
}

// Of is the region whose range holds workerID, if any: for telling which
// region issued an ID.
func (m Regions) Of(workerID uint64) (string, bool) {
	for _, r := range m.list {
		if r.Range.Contains(workerID) {
			return r.Name, true
		}
	}
	return "", false
}

// CheckLayout reports the first range that ends past the layout's
// largest worker ID, as a *RegionError of kind RegionBeyondLayout.
func (m Regions) CheckLayout(layout uidcore.Layout) error {
	for _, r := range m.list {
		if r.Range.Hi > layout.MaxWorkerID() {
			return &RegionError{Kind: RegionBeyondLayout, Entry: r.String(), Reason: fmt.Sprintf(
				"ends past the layout %s's largest worker ID %d (%d worker bits): ranges must lie within 0-%d",
				layout, layout.MaxWorkerID(), layout.WorkerBits, layout.MaxWorkerID())}
		}
	}
	return nil
}

// claimRange is the range region claims from in layout: every worker ID
// of the layout for the zero map.
func (m Regions) claimRange(region string, layout uidcore.Layout) (WorkerRange, error) {
	if m.IsZero() {
		return WorkerRange{Lo: 0, Hi: layout.MaxWorkerID()}, nil
	}
	if err := m.CheckLayout(layout); err != nil {
		return WorkerRange{}, err
	}
	return m.Range(region)
}

// Extends says whether m is old with regions added: every region of old
// has the same range in m, and m has more. Such a map may replace old in
// a fleet record without a new generation: the added ranges are worker
// IDs no region of old could claim (m has no overlaps). A fleet without
// regions is extended by no map: its instances may have claimed any
// worker ID.
func (m Regions) Extends(old Regions) bool {
	if old.IsZero() || len(m.list) <= len(old.list) {
		return false
	}
	for _, o := range old.list {
		if r, err := m.Range(o.Name); err != nil || r != o.Range {
			return false
		}
	}
	return true
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseRegions,
// so that a configuration decoder reads a map from its text.
func (m *Regions) UnmarshalText(text []byte) error {
	parsed, err := ParseRegions(string(text))
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// MarshalText implements encoding.TextMarshaler: the canonical text.
func (m Regions) MarshalText() ([]byte, error) { return []byte(m.String()), nil }
