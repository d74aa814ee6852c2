// Command benchreport turns the output of the end-to-end benchmarks (go
// test -bench of ./natsio/ and scripts/bench-service.sh) into the
// generated section of BENCHMARKS.md and an SVG chart. make bench runs it
// through scripts/bench-report.sh, which builds it in the tools module and
// runs it from the repository root:
//
//	benchreport -go bench-e2e-go.txt -cli bench-e2e-cli.txt \
//		-env bench-e2e-env.txt -md BENCHMARKS.md -svg docs/benchmarks.svg
//
// Only the part of BENCHMARKS.md between its markers is replaced (the
// section is appended when the file has none).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	goFile := flags.String("go", "", "output of go test -bench (runs may be concatenated)")
	cliFile := flags.String("cli", "", "output of scripts/bench-service.sh")
	envFile := flags.String("env", "", "lines describing the machine and the run, one per line")
	mdFile := flags.String("md", "BENCHMARKS.md", "Markdown file whose generated section is replaced")
	svgFile := flags.String("svg", "docs/benchmarks.svg", "chart to write")
	msgs1 := flags.Int("msgs1", 50_000, "requests bench-service.sh sends with 1 client (BENCH_MSGS1)")
	msgs8 := flags.Int("msgs8", 100_000, "requests bench-service.sh sends with 8 clients (BENCH_MSGS8)")
	sustainedFile := flags.String("sustained", "", "output of dispenser's BenchmarkSustained and BenchmarkSeqSustained")
	blocksFile := flags.String("blocks", "", "output of the ^BenchmarkBlocks benchmarks")
	tracingFile := flags.String("tracing", "", "output of scripts/bench-tracing.sh (tracing as deployed)")
	seriesFile := flags.String("series", "", "per-second samples of BenchmarkSustained (UID_BENCH_SERIES); with it only the -series-svg chart is drawn")
	seriesSVG := flags.String("series-svg", "docs/sustained.svg", "chart of the sustained samples to write")
	seriesTitle := flags.String("series-title", "Sustained: 4 clients × uid.batch 4096 (binary), default configuration", "title of the -series-svg chart")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *seriesFile != "" {
		return drawSeries(*seriesFile, *seriesSVG, *seriesTitle)
	}
	goRes, cliRes := map[string]samples{}, map[string]samples{}
	var err error
	if *goFile != "" {
		if goRes, err = parseFile(*goFile, parseGoBench); err != nil {
			return err
		}
	}
	if *cliFile != "" {
		if cliRes, err = parseFile(*cliFile, parseCLI); err != nil {
			return err
		}
	}
	var extra []string
	if *cliFile != "" {
		rss, err := parseFile(*cliFile, func(r io.Reader) (map[string]samples, error) {
			m, err := parseRSS(r)
			return map[string]samples{"rss": m}, err
		})
		if err != nil {
			return err
		}
		extra = append(extra, rssText(rss["rss"]))
	}
	for _, t := range []struct {
		file  *string
		table func(map[string]samples) string
	}{{sustainedFile, sustainedTable}, {blocksFile, blocksTable}} {
		if *t.file == "" {
			continue
		}
		res, err := parseFile(*t.file, parseGoBench)
		if err != nil {
			return err
		}
		extra = append(extra, t.table(res))
	}
	if *tracingFile != "" {
		text, err := os.ReadFile(*tracingFile)
		if err != nil {
			return err
		}
		if summary := tracingText(string(text)); summary != "" {
			extra = append(extra, summary)
		}
	}
	rows, missing := build(goRes, cliRes, *msgs1, *msgs8)
	if len(rows) == 0 {
		return fmt.Errorf("no benchmark results in %q and %q", *goFile, *cliFile)
	}
	var env []string
	if *envFile != "" {
		if env, err = readLines(*envFile); err != nil {
			return err
		}
	}
	chartPath, err := filepath.Rel(filepath.Dir(*mdFile), *svgFile)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(*mdFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	updated, err := replaceSection(string(doc), markdown(rows, missing, env, filepath.ToSlash(chartPath), extra...))
	if err != nil {
		return fmt.Errorf("%s: %w", *mdFile, err)
	}
	if err := os.MkdirAll(filepath.Dir(*svgFile), 0o755); err != nil {
		return err
	}
	chart, err := svgChart(rows, "uid-dispenser end-to-end benchmarks (make bench)")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*svgFile, chart, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(*mdFile, []byte(updated), 0o644); err != nil {
		return err
	}
	fmt.Printf("benchreport: %d scenarios into %s and %s", len(rows), *mdFile, *svgFile)
	if len(missing) > 0 {
		fmt.Printf("; not measured: %s", strings.Join(missing, ", "))
	}
	fmt.Println()
	return nil
}

// drawSeries writes the chart of the sustained benchmark's samples.
func drawSeries(in, out, title string) error {
	text, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	s, err := parseSeries(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(s) == 0 {
		return fmt.Errorf("%s: no samples", in)
	}
	chart, err := svgSeries(s, title)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, chart, 0o644); err != nil {
		return err
	}
	fmt.Printf("benchreport: %d scenarios into %s\n", len(s), out)
	return nil
}

func parseFile(path string, parse func(io.Reader) (map[string]samples, error)) (map[string]samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}
