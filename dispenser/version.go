package dispenser

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
)

// BuildInfo is what `dispenser -version` prints, and its Version is the
// micro service's version and the OTel resource's service.version, so
// that `nats micro info`, the traces and the binary agree.
type BuildInfo struct {
	Version   string // semantic version, without a leading v
	Commit    string // VCS revision, "" when the build did not record one
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string
}

// Build is the running binary's BuildInfo.
func Build() BuildInfo {
	info, _ := debug.ReadBuildInfo()
	return buildInfoFrom(info)
}

// buildInfoFrom reads a module build's version, or, for a build from a
// work tree (main module version "(devel)"), the protocol's version with
// the commit as build metadata ("1.0.0+0123456789ab"): micro accepts only
// semantic versions, and "(devel)" says nothing about which code runs.
func buildInfoFrom(info *debug.BuildInfo) BuildInfo {
	b := BuildInfo{Version: protocol.ServiceVersion, GoVersion: runtime.Version()}
	if info == nil {
		return b
	}
	if info.GoVersion != "" {
		b.GoVersion = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		b.Version = strings.TrimPrefix(v, "v")
		return b
	}
	if b.Commit != "" {
		b.Version += "+" + b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			b.Version += ".dirty"
		}
	}
	return b
}

// String is the -version output: version, commit and Go version.
func (b BuildInfo) String() string {
	commit := b.Commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS information)"
	case b.Modified:
		commit += " (modified)"
	}
	return fmt.Sprintf("dispenser %s\ncommit %s\n%s %s/%s\n", b.Version, commit, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}
