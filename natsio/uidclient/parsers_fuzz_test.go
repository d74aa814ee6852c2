package uidclient

import (
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// FuzzDecodeParts: the client's decoder of uid.parse replies.
func FuzzDecodeParts(f *testing.F) {
	good, _ := uidcore.Parts{ID: 123757721697648640, Time: time.Date(2026, 11, 30, 12, 3, 10, 0, time.UTC), WorkerID: 3}.MarshalJSON()
	for _, s := range []string{string(good), `{}`, `{"UID":"1","timestamp":"2026-01-01 00:00:00","workerId":"0","sequence":"0"}`,
		`{"UID":1}`, `{"UID":"-1","timestamp":"x","workerId":"","sequence":"9"}`, `[]`, `null`, ``, `{"UID":"1","timestamp":"2026-02-30 25:00:00","workerId":"0","sequence":"0"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeParts(data)
		if err != nil {
			if len(err.Error()) > 600 {
				t.Fatalf("error of %d bytes: the reply is quoted in full", len(err.Error()))
			}
			return
		}
		if p.Time.Location() != time.UTC {
			t.Fatalf("%q: time %v not in UTC", data, p.Time)
		}
		enc, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeParts(enc)
		if err != nil || again != p {
			t.Fatalf("%q: round trip through %s gives %+v, %v; want %+v", data, enc, again, err, p)
		}
	})
}
