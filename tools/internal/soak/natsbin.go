package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// productModule is the module of the product the soak tests. The soak
// lives in the tools module beside it; the binaries it runs are built in
// the product's own module, so they link exactly the versions the
// product's go.mod selects, not the tools module's (whose other
// dependencies may raise shared ones).
const productModule = "github.com/uid-dispenser/uid-dispenser"

// natsServerModule is the module the soak's nats-server binary is built
// from, at the version the product's go.mod requires.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// productDir is the product module's directory (the tools module
// replaces it with ../). It runs the go tool, so it must run inside the
// tools module.
func productDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	if err != nil {
		return "", fmt.Errorf("soak: the directory of %s: %w", productModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("soak: %s has no directory (not replaced by a local copy?)", productModule)
	}
	return dir, nil
}

// goInProduct runs the go tool with args in the product's module and
// returns its standard output; an error carries its standard error.
func goInProduct(ctx context.Context, args ...string) ([]byte, error) {
	dir, err := productDir(ctx)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", append([]string{"-C", dir}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("soak: go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// BuildDispenser builds cmd/dispenser into the file bin, with the given
// build tags (the fault harness's faultclock).
func BuildDispenser(ctx context.Context, bin string, tags ...string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	args := []string{"build", "-o", abs}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	_, err = goInProduct(ctx, append(args, "./cmd/dispenser")...)
	return err
}

// NATSServerBinary returns the path of a nats-server binary built from
// the product go.mod's nats-server module, building it when the user's
// cache has none of that version yet (a build takes a minute on two
// cores; the cache makes every later run, and CI's, skip it). It runs
// the go tool, so it must run inside the tools module.
func NATSServerBinary(ctx context.Context) (string, error) {
	out, err := goInProduct(ctx, "list", "-m", "-f", "{{.Version}}", natsServerModule)
	if err != nil {
		return "", err
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
	if _, err := goInProduct(ctx, "build", "-o", filepath.Join(tmp, "nats-server"), natsServerModule); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	return bin, nil
}
