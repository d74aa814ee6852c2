package dispenser

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// markdownLink is a Markdown link's target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchorOf is GitHub's anchor of a heading: lower case, punctuation but
// - and _ dropped, spaces made dashes.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inCode := false
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(l, "#") {
			out[anchorOf(strings.TrimLeft(l, "#"))] = true
		}
	}
	return out
}

// Every relative link of the README and docs/ names a file that exists
// and, with #anchor, a heading it has (docs/operations.md pointed at a
// README section that did not exist).
func TestDocumentationLinksResolve(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../BENCHMARKS.md")
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			checked++
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", f, target, path, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links checked: the link pattern misses them", checked)
	}
}

// The README's parse reply is one the service gives: the parse of its ID
// in the default layout, to the byte.
func TestReadmeParseExampleIsReal(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for l := range strings.SplitSeq(string(data), "\n") {
		if !strings.HasPrefix(l, `{"UID":`) {
			continue
		}
		found++
		var shown uidcore.ParsedJSON
		if err := json.Unmarshal([]byte(l), &shown); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		id, err := strconv.ParseUint(shown.UID, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := uidcore.DefaultLayout().Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(parts)
		if err != nil {
			t.Fatal(err)
		}
		if l != string(want) {
			t.Errorf("README shows\n%s\nthe service replies\n%s", l, want)
		}
		if !strings.Contains(string(data), "uid.parse "+shown.UID) {
			t.Errorf("README does not show the request for %s", shown.UID)
		}
	}
	if found == 0 {
		t.Fatal("README shows no parse reply")
	}
}
