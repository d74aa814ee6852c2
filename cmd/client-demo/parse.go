package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
	"github.com/uid-dispenser/uid-dispenser/workerid"
)

// runParse decodes IDs given as arguments, or one per line (or
// whitespace-separated) on stdin when there are none, with a layout,
// locally: no server is needed, so IDs of a fleet that no longer runs,
// or of UidGenerator, can be read. It prints one JSON object per ID and
// exits 1 if any input was not an ID.
func runParse(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("client-demo parse", flag.ContinueOnError)
	flags.SetOutput(stderr)
	layoutFlag := flags.String("layout", uidcore.PresetDefault, "the IDs' layout: a preset ("+uidcore.Presets+"), or time/worker/sequence bits such as 31/16/16, optionally @ an epoch, RFC 3339 or a date, midnight UTC (28/22/13@2016-05-20T00:00:00+08:00, 31/10/22@2026-01-01)")
	regionsFlag := flags.String("regions", "", "the fleet's map of regions (DISPENSER_REGIONS, e.g. east=0-511,west=512-1023): print the region of each ID")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: client-demo parse [-layout L] [-regions MAP] [ID ...]   (no IDs: read them from standard input)")
		flags.PrintDefaults()
	}
	if err := flags.Parse(idsAfterFlags(args)); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	ids := flags.Args()
	layout, err := uidcore.ParseLayout(*layoutFlag)
	if err != nil {
		fmt.Fprintln(stderr, "client-demo parse: -layout:", err)
		return 2
	}
	regions, err := workerid.ParseRegions(*regionsFlag)
	if err == nil {
		err = regions.CheckLayout(layout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "client-demo parse: -regions:", err)
		return 2
	}
	enc := json.NewEncoder(stdout)
	code := 0
	decode := func(s string) {
		id, err := parseIDText(s)
		if err != nil {
			fmt.Fprintln(stderr, "client-demo parse:", err)
			code = 1
			return
		}
		parsed := layout.ParseUID(id)
		parsed.Region, _ = regions.Of(id >> layout.SeqBits & layout.MaxWorkerID())
		if err := enc.Encode(parsed); err != nil {
			fmt.Fprintln(stderr, "client-demo parse:", err)
			code = 1
		}
	}
	if len(ids) > 0 {
		for _, a := range ids {
			decode(a)
		}
		return code
	}
	sc := bufio.NewScanner(stdin)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		decode(sc.Text())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(stderr, "client-demo parse: standard input:", err)
		return 1
	}
	return code
}

// idsAfterFlags marks the end of the flags with "--" before a first ID
// that is negative (UidGenerator's wrapped IDs), which the flag package
// would otherwise take for an unknown flag.
func idsAfterFlags(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || !strings.HasPrefix(a, "-"):
			return args
		case a == "-layout" || a == "--layout" || a == "-regions" || a == "--regions":
			i++ // its value
		case len(a) > 1 && a[1] >= '0' && a[1] <= '9':
			return append(append(args[:i:i], "--"), args[i:]...)
		}
	}
	return args
}

// parseIDText reads an ID: decimal, unsigned up to 2^64-1 or negative
// down to -2^63 as Java prints a long whose sign bit is set, or the
// dispenser's base32 (13 characters with a letter, any case). It returns
// the 64 bits.
func parseIDText(s string) (uint64, error) {
	const want = "want a decimal number from -9223372036854775808 to 18446744073709551615, or 13 base32 characters"
	if len(s) == protocol.Base32Width && strings.ContainsAny(strings.ToUpper(s), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		id, err := protocol.ParseBase32(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not an ID: %w", s, err)
		}
		return id, nil
	}
	if strings.HasPrefix(s, "-") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an ID: %s", s, want)
		}
		return uint64(n), nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 64)
	if err != nil || strings.HasPrefix(s, "+-") || strings.HasPrefix(s, "++") {
		return 0, fmt.Errorf("%q is not an ID: %s", s, want)
	}
	return n, nil
}
