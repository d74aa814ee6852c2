package numfmt

import "testing"

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 65536: "65,536", 123456: "123,456",
		1234567: "1,234,567", 9223372036854775807: "9,223,372,036,854,775,807", -1234: "-1234",
	} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
