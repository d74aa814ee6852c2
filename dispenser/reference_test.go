package dispenser

import (
	"bytes"
	"os"
	"testing"
)

// The operator's reference must list exactly what the dispenser reads.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	var want bytes.Buffer
	if err := WriteReference(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("docs/configuration.md is out of date: run `make docs`")
	}
	if !bytes.Contains(got, []byte("`DISPENSER_NATS_URL`")) || !bytes.Contains(got, []byte("`DISPENSER_LEASE_TTL`")) {
		t.Fatal("the reference lacks core variables")
	}
}
