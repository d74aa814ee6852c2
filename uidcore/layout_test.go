package uidcore

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
	"github.com/uid-dispenser/uid-dispenser/uidcore/uidcoretest"
)

func TestDefaultLayoutMeetsItsPromises(t *testing.T) {
	l := DefaultLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if years := l.RunwayEnd().Sub(l.Epoch).Hours() / 24 / 365.25; years < 60 {
		t.Errorf("runway %.1f years, want >= 60", years)
	}
	// A fleet of dozens of instances, each sustaining millions a second
	// with one worker ID (and more with lanes).
	if l.MaxWorkerID()+1 < 1024 {
		t.Errorf("%d worker IDs, want >= 1024", l.MaxWorkerID()+1)
	}
	if l.MaxSequence()+1 < 4<<20 {
		t.Errorf("%d IDs per second, want >= 4Mi", l.MaxSequence()+1)
	}
	if l.Epoch.Year() != 2026 || l.Epoch.Location() != time.UTC {
		t.Errorf("epoch %v, want a UTC instant in 2026", l.Epoch)
	}
}

func TestUidGeneratorPresetEndsWhereUidGeneratorDid(t *testing.T) {
	l := UidGeneratorLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	utc8 := time.FixedZone("UTC+8", 8*3600)
	if want := time.Date(2016, 5, 20, 0, 0, 0, 0, utc8); !l.Epoch.Equal(want) {
		t.Errorf("epoch %v, want %v", l.Epoch, want)
	}
	// Its time field ran out after 2024-11-20 21:24:15 UTC+8.
	if got, want := time.Unix(l.LastSecond(), 0), time.Date(2024, 11, 20, 21, 24, 15, 0, utc8); !got.Equal(want) {
		t.Errorf("last second %v, want %v", got.In(utc8), want)
	}
	if _, err := l.Compose(l.LastSecond()+1, 1, 0); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("compose after the runway: %v, want ErrTimeExhausted", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	base := DefaultLayout()
	cases := []struct {
		name   string
		mutate func(*Layout)
		field  string
	}{
		{"sum above 63", func(l *Layout) { l.TimeBits = 32 }, "Layout"},
		{"time too small", func(l *Layout) { l.TimeBits, l.SeqBits = 10, 37 }, "TimeBits"},
		{"no worker bits", func(l *Layout) { l.WorkerBits, l.SeqBits = 0, 32 }, "WorkerBits"},
		{"no sequence bits", func(l *Layout) { l.SeqBits, l.WorkerBits = 0, 32 }, "SeqBits"},
		{"no epoch", func(l *Layout) { l.Epoch = time.Time{} }, "Epoch"},
		{"epoch before 1970", func(l *Layout) { l.Epoch = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }, "Epoch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := base
			c.mutate(&l)
			err := l.Validate()
			var le *setting.Error
			if !errors.As(err, &le) {
				t.Fatalf("Validate() = %v, want a *setting.Error", err)
			}
			if le.Field != c.field {
				t.Errorf("field %q, want %q (%v)", le.Field, c.field, err)
			}
		})
	}
}

func TestComposeParseRoundTrip(t *testing.T) {
	for _, l := range []Layout{DefaultLayout(), UidGeneratorLayout(), smallLayout()} {
		sec := l.EpochSecond() + 12345
		id, err := l.Compose(sec, l.MaxWorkerID(), l.MaxSequence())
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if int64(id) < 0 {
			t.Fatalf("%s: negative ID %d", l, int64(id))
		}
		p, err := l.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Time.Unix() != sec || p.WorkerID != l.MaxWorkerID() || p.Sequence != l.MaxSequence() || p.ID != id {
			t.Errorf("%s: parse(compose) = %+v", l, p)
		}
		if p.Time.Location() != time.UTC {
			t.Errorf("%s: parsed time in %v, want UTC", l, p.Time.Location())
		}
	}
}

func TestComposeRefusesWhatDoesNotFit(t *testing.T) {
	l := DefaultLayout()
	if _, err := l.Compose(l.EpochSecond()-1, 0, 0); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("before the epoch: %v", err)
	}
	if _, err := l.Compose(l.LastSecond()+1, 0, 0); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("after the runway: %v", err)
	}
	if _, err := l.Compose(l.EpochSecond(), l.MaxWorkerID()+1, 0); !errors.Is(err, ErrWorkerRange) {
		t.Errorf("worker out of range: %v", err)
	}
	if _, err := l.Compose(l.EpochSecond(), 0, l.MaxSequence()+1); !errors.Is(err, ErrSequenceRange) {
		t.Errorf("sequence out of range: %v", err)
	}
	if _, err := l.Parse(1 << 63); err == nil {
		t.Error("parse of an ID with the sign bit set succeeded")
	}
}

func TestParsedJSONMatchesUidGenerator(t *testing.T) {
	l := UidGeneratorLayout()
	sec := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).Unix()
	id, err := l.Compose(sec, 42, 7)
	if err != nil {
		t.Fatal(err)
	}
	p := uidcoretest.MustParse(t, l.Parse, id)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"UID": p.JSON().UID, "timestamp": "2020-01-02 03:04:05", "workerId": "42", "sequence": "7"}
	if len(got) != len(want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (json %s)", k, got[k], v, b)
		}
	}
}

func FuzzLayoutValidate(f *testing.F) {
	f.Add(uint(31), uint(16), uint(16), int64(1767225600))
	f.Add(uint(28), uint(22), uint(13), int64(1463673600))
	f.Add(uint(0), uint(0), uint(63), int64(0))
	f.Add(uint(63), uint(0), uint(0), int64(-5))
	f.Add(uint(100), uint(1), uint(1), int64(1))
	f.Fuzz(func(t *testing.T, tb, wb, sb uint, epoch int64) {
		l := Layout{TimeBits: tb, WorkerBits: wb, SeqBits: sb, Epoch: time.Unix(epoch, 0)}
		if err := l.Validate(); err != nil {
			var le *setting.Error
			if !errors.As(err, &le) || le.Field == "" || le.Reason == "" {
				t.Fatalf("error without field and reason: %v", err)
			}
			return
		}
		if tb+wb+sb != 63 {
			t.Fatalf("accepted %d bits", tb+wb+sb)
		}
		id, err := l.Compose(l.LastSecond(), l.MaxWorkerID(), l.MaxSequence())
		if err != nil {
			t.Fatalf("compose of the largest fields: %v", err)
		}
		if id>>63 != 0 {
			t.Fatalf("largest ID %d sets the sign bit", id)
		}
	})
}

func FuzzComposeParse(f *testing.F) {
	f.Add(int64(0), uint64(0), uint64(0))
	f.Add(int64(2147483647), uint64(65535), uint64(65535))
	f.Add(int64(-1), uint64(1), uint64(1))
	f.Add(int64(2147483648), uint64(65536), uint64(65536))
	l := DefaultLayout()
	f.Fuzz(func(t *testing.T, delta int64, worker, seq uint64) {
		id, err := l.Compose(l.EpochSecond()+delta, worker, seq)
		fits := delta >= 0 && uint64(delta) <= l.MaxDelta() && worker <= l.MaxWorkerID() && seq <= l.MaxSequence()
		if (err == nil) != fits {
			t.Fatalf("compose(%d, %d, %d): err %v, fits %v", delta, worker, seq, err, fits)
		}
		if err != nil {
			return
		}
		p, err := l.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Time.Unix()-l.EpochSecond() != delta || p.WorkerID != worker || p.Sequence != seq {
			t.Fatalf("round trip (%d, %d, %d) -> %+v", delta, worker, seq, p)
		}
	})
}

// FuzzParseUID: any 64 bits decode under any preset without panicking,
// with fields in range; an ID the layout can issue decodes as Parse does.
func FuzzParseUID(f *testing.F) {
	for _, id := range []uint64{0, 1, 1 << 62, 1<<63 - 1, 1 << 63, 1<<64 - 1, 11422525859412631552} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id uint64) {
		for _, l := range []Layout{DefaultLayout(), UidGeneratorLayout(), JSSafeLayout()} {
			got := l.ParseUID(id)
			w, _ := strconv.ParseUint(got.WorkerID, 10, 64)
			s, _ := strconv.ParseUint(got.Sequence, 10, 64)
			if w > l.MaxWorkerID() || s > l.MaxSequence() {
				t.Fatalf("%d under %s: %+v out of range", id, l, got)
			}
			if id <= l.MaxID() {
				want := uidcoretest.MustParse(t, l.Parse, id)
				if got != want.JSON() {
					t.Fatalf("%d under %s: %+v, Parse gives %+v", id, l, got, want.JSON())
				}
			} else if (id>>63 != 0) != (got.Wrapped != "" && strings.HasPrefix(got.UID, "-")) {
				t.Fatalf("%d under %s: wrapped flag does not match the sign bit: %+v", id, l, got)
			}
		}
	})
}
