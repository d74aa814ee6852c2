package natsconn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Version is a nats-server release, as its INFO reports it (2.9.10).
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less says whether v is an older release than o.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// ParseVersion reads "2.9.10", "v2.10.23" or "2.11.0-beta.1" (the
// pre-release counts as its release: a beta of a fixed release carries the
// fix or is older, and the check below errs on the side of refusing).
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("natsconn: server version %q is not major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("natsconn: server version %q is not major.minor.patch", s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// MinReplicatedCAS is the first nats-server release that checks a KV
// update's expected revision inside the stream's Raft group: before it a
// clustered stream checked it before proposing, so two compare-and-sets
// at one revision could both succeed (nats-server#4320, fixed in 2.9.21).
// Every lease, counter and fleet write of the dispenser is such a
// compare-and-set.
var MinReplicatedCAS = Version{2, 9, 21}

// MinRecommended is the oldest nats-server release the documentation
// supports (docs/operations.md, "What the guarantees assume"):
// sync_interval exists from 2.10, and 2.10.20 to 2.10.22 could forget a
// whole stream after a few kill -9s (nats-server#6888, fixed in 2.10.23).
var MinRecommended = Version{2, 10, 23}

// OldServerError refuses a replicated stream on a server older than
// MinReplicatedCAS.
type OldServerError struct {
	Server   Version
	What     string // the bucket or stream, e.g. "KV bucket uid_workers"
	Replicas int
	Setting  string // what sets the replica count, for the advice
}

func (e *OldServerError) Error() string {
	return fmt.Sprintf("natsconn: %s with %d replicas on nats-server %s: before %s a replicated stream lets two compare-and-sets of one key both succeed (nats-server#4320), which hands out a worker ID or numbers twice; "+
		"upgrade nats-server to %s or later (%s recommended), or set %s=1 on a single server",
		e.What, e.Replicas, e.Server, MinReplicatedCAS, MinReplicatedCAS, MinRecommended, e.Setting)
}

// CheckReplicated returns an *OldServerError when a stream of replicas
// replicas on the server nc is connected to would break compare-and-set.
// A version that cannot be read is refused for a replicated stream too:
// nothing says the server is safe.
func CheckReplicated(nc *nats.Conn, replicas int, what, setting string) error {
	if replicas <= 1 {
		return nil
	}
	raw := nc.ConnectedServerVersion()
	v, err := ParseVersion(raw)
	if err != nil {
		return fmt.Errorf("natsconn: %s with %d replicas: cannot tell whether nats-server %q checks compare-and-set in its Raft group (%s or later does): %w", what, replicas, raw, MinReplicatedCAS, err)
	}
	if v.Less(MinReplicatedCAS) {
		return &OldServerError{Server: v, What: what, Replicas: replicas, Setting: setting}
	}
	return nil
}

// ClusterSize is how many servers of the connected server's cluster the
// client knows (the connected one and those its INFO advertised), 0 when
// the server is not clustered. A one-node cluster (clustered JetStream on
// one server) counts 1.
func ClusterSize(nc *nats.Conn) int {
	if nc.ConnectedClusterName() == "" {
		return 0
	}
	return max(1, len(nc.Servers()))
}

// SyncPolicy is how a nats-server syncs JetStream writes to disk.
type SyncPolicy struct {
	Always   bool          // fsync after every write (sync_interval: always)
	Interval time.Duration // else: fsync every Interval (0: the server's default, 2m)
	Server   string        // the server's name
}

// Synced says whether every acknowledged write is on disk.
func (p SyncPolicy) Synced() bool { return p.Always }

// ReadSyncPolicy asks the connected server for its JetStream
// configuration (VARZ over the system account's request subject), which
// answers only a connection with system-account rights, or in an account
// that imports that service; ok is false when nobody answers in time or
// the reply has no JetStream configuration: callers then cannot tell and
// say so. A server older than 2.10 reports no sync settings and cannot
// sync every write: not Always.
//
// It asks only on a connection without credentials (Anonymous): a user
// given restricted permissions (docs/security.md's) would trip a
// permissions violation in the server's log for a subject it may not
// publish.
func ReadSyncPolicy(ctx context.Context, nc *nats.Conn) (p SyncPolicy, ok bool) {
	id := nc.ConnectedServerId()
	if id == "" || !Anonymous(nc) {
		return SyncPolicy{}, false
	}
	msg, err := nc.RequestWithContext(ctx, "$SYS.REQ.SERVER."+id+".VARZ", nil)
	if err != nil {
		return SyncPolicy{}, false
	}
	return parseVarzSync(msg.Data)
}

// Anonymous says whether nc connected with no credentials at all: no
// user, password, token, JWT, NKey, user info in a URL or client
// certificate (which the server may map to a user). Such a connection has
// whatever permissions the server gives everyone.
func Anonymous(nc *nats.Conn) bool {
	o := nc.Opts
	if o.User != "" || o.Password != "" || o.Token != "" || o.TokenHandler != nil || o.UserInfo != nil || o.UserJWT != nil || o.Nkey != "" || o.TLSCertCB != nil {
		return false
	}
	if o.TLSConfig != nil && (len(o.TLSConfig.Certificates) > 0 || o.TLSConfig.GetClientCertificate != nil) {
		return false
	}
	for _, raw := range append([]string{o.Url}, o.Servers...) {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			return false
		}
	}
	return true
}

// parseVarzSync reads the sync settings of a VARZ reply.
func parseVarzSync(data []byte) (SyncPolicy, bool) {
	var reply struct {
		Data struct {
			Name      string `json:"server_name"`
			JetStream *struct {
				Config *struct {
					SyncInterval *time.Duration `json:"sync_interval"`
					SyncAlways   bool           `json:"sync_always"`
				} `json:"config"`
			} `json:"jetstream"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &reply) != nil || reply.Data.JetStream == nil || reply.Data.JetStream.Config == nil {
		return SyncPolicy{}, false
	}
	c := reply.Data.JetStream.Config
	p := SyncPolicy{Always: c.SyncAlways, Server: reply.Data.Name}
	if c.SyncInterval != nil {
		p.Interval = *c.SyncInterval
	}
	// 2.9 and older print no sync settings: they cannot sync always.
	return p, true
}
