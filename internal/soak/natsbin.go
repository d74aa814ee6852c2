package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// natsServerModule is the module the soak's nats-server binary is built
// from, at the version go.mod requires.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// NATSServerBinary returns the path of a nats-server binary built from
// go.mod's nats-server module, building it when the user's cache has none
// of that version yet (a build takes a minute on two cores; the cache
// makes every later run, and CI's, skip it). It runs the go tool, so it
// must run inside the module.
func NATSServerBinary(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		return "", fmt.Errorf("soak: the nats-server version in go.mod: %w", err)
	}
	version := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "uid-dispenser")
	bin := filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	// Built beside its final name and renamed into place: two soaks
	// building at once never run a half-written binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	defer os.RemoveAll(tmp)
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, "nats-server"), natsServerModule)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("soak: go build %s: %w\n%s", natsServerModule, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	return bin, nil
}
