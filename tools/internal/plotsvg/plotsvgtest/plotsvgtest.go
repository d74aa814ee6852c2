// Package plotsvgtest checks the charts plotsvg draws, for the tests of
// the tools that draw them.
package plotsvgtest

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// Texts decodes the SVG and returns the text of every <text> element in
// order; it fails the test when the SVG is not well-formed XML or has no
// text.
func Texts(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	var texts []string
	in := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "text" {
				in = true
				texts = append(texts, "")
			}
		case xml.EndElement:
			in = in && tok.Name.Local != "text"
		case xml.CharData:
			if in {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	if len(texts) == 0 {
		t.Fatal("the chart has no text")
	}
	return texts
}
