package dispenser

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/uid-dispenser/uid-dispenser/internal/supercluster"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/natsconn"
	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// securityDocPermissions is the nats-server configuration block of the NATS
// section of docs/security.md (the README links it as the permissions to
// use): the one ```conf block there.
func securityDocPermissions(t *testing.T) string {
	t.Helper()
	return securityDocBlock(t, "## NATS")
}

// securityDocBlock is the one ```conf block of docs/security.md under
// heading (a line of its own), up to the next heading of any level.
func securityDocBlock(t *testing.T, heading string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/security.md has no section %q", heading)
	}
	// Headings only: the conf blocks' comments start with "# ".
	for _, next := range []string{"\n## ", "\n### "} {
		if i := strings.Index(section, next); i >= 0 {
			section = section[:i]
		}
	}
	if n := strings.Count(section, "\n```conf\n"); n != 1 {
		t.Fatalf("the section %q of docs/security.md has %d ```conf blocks, want 1", heading, n)
	}
	_, block, _ := strings.Cut(section, "\n```conf\n")
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatalf("the ```conf block of %q does not end", heading)
	}
	return block
}

// waitForLog waits until the log holds want.
func waitForLog(t *testing.T, log *testenv.LogBuffer, want string) {
	t.Helper()
	if !strings.Contains(log.String(), want) {
		defer func() {
			if t.Failed() {
				t.Logf("the log:\n%s", log.String())
			}
		}()
	}
	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("%q in the log", want), func() bool { return strings.Contains(log.String(), want) })
}

// TestSecurityDocPermissions loads the NATS permissions block of
// docs/security.md into an embedded nats-server with the server's own
// configuration loader, then
// runs a dispenser (with blocks) as the dispenser user, takes IDs as the
// service user and from blocks as the blocks user, and checks the
// refusals: the service user may not serve (subscribe to uid.next, in the
// queue group or not) nor touch JetStream, the blocks user may do nothing
// but take blocks, and the dispenser user may not request IDs nor serve
// outside the queue group.
func TestSecurityDocPermissions(t *testing.T) {
	const dispenserPassword, servicePassword, blocksPassword, ordersPassword = "d-pw-8Hq", "s-pw-3Zx", "b-pw-5Rt", "o-pw-2Kw"
	t.Setenv("UID_ORDERS_PASSWORD", ordersPassword)
	t.Setenv("UID_DISPENSER_PASSWORD", dispenserPassword)
	t.Setenv("UID_SERVICE_PASSWORD", servicePassword)
	t.Setenv("UID_BLOCKS_PASSWORD", blocksPassword)
	confFile := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(confFile, []byte(securityDocPermissions(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatalf("the permissions block of docs/security.md does not load: %v", err)
	}
	if len(opts.Users) != 4 {
		t.Fatalf("%d users in the block of docs/security.md, want dispenser, service, blocks and orders", len(opts.Users))
	}
	srv := testenv.NATS(t, opts)
	url := srv.ClientURL()

	cfg := testConfig(url, "")
	cfg.NATSUser, cfg.NATSPassword = "dispenser", dispenserPassword
	cfg.BlocksEnabled = true
	cfg.Sequences = "orders,invoices"
	var dispenserLog testenv.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg, WithLogger(dispenserLog.Logger(slog.LevelDebug)))
	if err != nil {
		t.Fatalf("the dispenser user cannot start a dispenser: %v\n%s", err, dispenserLog.String())
	}
	t.Cleanup(func() { shutdown(t, d) })

	connectAs := func(user, password string, log *testenv.LogBuffer) *natsconn.Conn {
		t.Helper()
		conn, err := natsconn.Connect(ctx, natsconn.Config{URL: url, User: user, Password: password, Logger: log.Logger(slog.LevelDebug)})
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(conn.Close)
		return conn
	}
	var serviceLog testenv.LogBuffer
	service := connectAs("service", servicePassword, &serviceLog)
	client := uidclient.New(service.Conn, uidclient.Config{})
	ids := takeIDs(ctx, t, client, 4, 25, 1000)
	if w := workers(t, ids); w[d.WorkerID()] != len(ids) {
		t.Fatalf("IDs by worker %v, the dispenser holds %d", w, d.WorkerID())
	}
	if parts, err := client.Parse(ctx, ids[0]); err != nil || parts.ID != ids[0] {
		t.Fatalf("uid.parse as the service user: %+v, %v", parts, err)
	}

	// The blocks user takes IDs from the blocks the dispenser publishes.
	var blocksLog testenv.LogBuffer
	src, err := uidclient.NewBlockSource(connectAs("blocks", blocksPassword, &blocksLog).Conn, uidclient.BlockSourceConfig{Logger: blocksLog.Logger(slog.LevelDebug),
		LossWindow: 100 * time.Millisecond}) // claims each block: the user's rights on the claims bucket
	if err != nil {
		t.Fatal(err)
	}
	fromBlocks := make([]uint64, 2*protocol.DefaultBlockSize)
	n, err := src.NextN(ctx, fromBlocks)
	src.Close()
	if err != nil || n != len(fromBlocks) {
		t.Fatalf("%d IDs from blocks as the blocks user, %v; log:\n%s", n, err, blocksLog.String())
	}
	testenv.CheckDistinct(t, append(ids, fromBlocks...))

	// The orders user takes the numbers of orders, and only those.
	var ordersLog testenv.LogBuffer
	orders := uidclient.New(connectAs("orders", ordersPassword, &ordersLog).Conn, uidclient.Config{})
	if n, err := orders.SeqNext(ctx, "orders"); err != nil || n != 1 {
		t.Fatalf("uid.seq.orders.next as the orders user: %d, %v; log:\n%s", n, err, ordersLog.String())
	}
	if nums, err := orders.SeqBatch(ctx, "orders", 3); err != nil || len(nums) != 3 || nums[0] != 2 {
		t.Fatalf("uid.seq.orders.batch as the orders user: %v, %v", nums, err)
	}
	// A renewal that reads a lease as gone or taken confirms it at the
	// KV stream's leader (kvstore.leaderGet), which no request above
	// needs: the dispenser user must be allowed it.
	var leaderLog testenv.LogBuffer
	leaderReq := `{"last_by_subj":"$KV.` + cfg.WorkerKVBucket + `.lease.` + strconv.FormatUint(d.WorkerID(), 10) + `"}`
	if msg, err := connectAs("dispenser", dispenserPassword, &leaderLog).Conn.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+cfg.WorkerKVBucket, []byte(leaderReq)); err != nil || !strings.Contains(string(msg.Data), `"message"`) {
		t.Fatalf("the leader read of the dispenser's lease as the dispenser user: %v %s; log:\n%s", err, msgData(msg), leaderLog.String())
	}
	for _, log := range []*testenv.LogBuffer{&dispenserLog, &blocksLog, &ordersLog, &leaderLog} {
		if strings.Contains(log.String(), "Permissions Violation") {
			t.Fatalf("a user lacks a permission:\n%s", log.String())
		}
	}

	// The service user may not serve, nor reach JetStream.
	if _, err := service.Conn.SubscribeSync("uid.next"); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &serviceLog, `Permissions Violation for Subscription to \"uid.next\"`)
	if _, err := service.Conn.QueueSubscribeSync("uid.batch", "uid-dispenser"); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &serviceLog, `Permissions Violation for Subscription to \"uid.batch\" using queue \"uid-dispenser\"`)
	if err := service.Conn.Publish("$JS.API.STREAM.INFO.UID_BLOCKS", nil); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &serviceLog, `Permissions Violation for Publish to \"$JS.API.STREAM.INFO.UID_BLOCKS\"`)
	if err := service.Conn.Publish("uid.seq.orders.next", nil); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &serviceLog, `Permissions Violation for Publish to \"uid.seq.orders.next\"`)

	// The blocks user may take blocks only: not delete or reset the
	// consumer (which would hand blocks out again), nor look at another
	// consumer or the stream, nor publish blocks, nor request IDs.
	blocksConn := connectAs("blocks", blocksPassword, &blocksLog)
	for _, subject := range []string{
		"$JS.API.CONSUMER.DELETE.UID_BLOCKS.uid-blocks", "$JS.API.CONSUMER.RESET.UID_BLOCKS.uid-blocks",
		"$JS.API.CONSUMER.INFO.UID_BLOCKS.other", "$JS.API.STREAM.INFO.UID_BLOCKS", "$JS.API.STREAM.PURGE.UID_BLOCKS",
		"uid.blocks", "uid.next",
	} {
		if err := blocksConn.Conn.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, &blocksLog, `Permissions Violation for Publish to \"`+subject+`\"`)
	}

	// The orders user may not take another sequence's numbers, nor IDs.
	ordersConn := connectAs("orders", ordersPassword, &ordersLog)
	for _, subject := range []string{"uid.seq.invoices.next", "uid.next"} {
		if err := ordersConn.Conn.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, &ordersLog, `Permissions Violation for Publish to \"`+subject+`\"`)
	}

	// The dispenser user may not request IDs, nor serve outside the
	// queue group.
	var otherLog testenv.LogBuffer
	other := connectAs("dispenser", dispenserPassword, &otherLog)
	if err := other.Conn.Publish("uid.next", nil); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &otherLog, `Permissions Violation for Publish to \"uid.next\"`)
	if _, err := other.Conn.SubscribeSync("uid.next"); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &otherLog, `Permissions Violation for Subscription to \"uid.next\"`)
}

// TestMySQLTLSNeverFallsBackToPlaintext: with tls=true in the DSN and a
// server without TLS, start-up fails instead of going on in plaintext, as
// docs/security.md says.
func TestMySQLTLSNeverFallsBackToPlaintext(t *testing.T) {
	dsn := testenv.MySQL(t)
	cfg := testConfig(testenv.NATS(t, nil).ClientURL(), dsn+"&tls=true")
	cfg.StoreStartupDeadline = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg, WithLogger(testLogger()))
	if err == nil {
		// The machine's server has TLS and trusts... nothing to prove here.
		shutdown(t, d)
		t.Skip("the MySQL server accepted TLS: this test needs one without")
	}
	if !strings.Contains(err.Error(), "TLS requested but server does not support TLS") {
		t.Fatalf("start-up error %v; want the driver's refusal of a server without TLS", err)
	}
}

// msgData is a reply's body, or nothing for no reply.
func msgData(msg *nats.Msg) string {
	if msg == nil {
		return ""
	}
	return string(msg.Data)
}

// TestSecurityDocRegionPermissions loads the regions' permissions block
// of docs/security.md into both servers of a supercluster (east and
// west joined by gateways), runs a dispenser of each region as its
// region's user, with blocks, and checks: each claims in its own range
// and renews in its own bucket, publishes its region's blocks, reads the
// other region's fleet record at start-up; the service user is served
// in both regions, by the region it calls; and east's dispenser user is
// refused everything of west's store but that record.
func TestSecurityDocRegionPermissions(t *testing.T) {
	passwords := map[string]string{"east": "e-pw-7Tn", "west": "w-pw-4Gd"}
	const servicePassword = "s-pw-9Lc"
	t.Setenv("UID_DISPENSER_EAST_PASSWORD", passwords["east"])
	t.Setenv("UID_DISPENSER_WEST_PASSWORD", passwords["west"])
	t.Setenv("UID_SERVICE_PASSWORD", servicePassword)
	block := securityDocBlock(t, "### Across regions")
	// The test's own connections (the supercluster's probes, the checks
	// of the streams) connect without credentials as a user with every
	// permission, added here: the doc's users are what is under test.
	const users = "\n  users = [\n"
	if strings.Count(block, users) != 1 {
		t.Fatalf("the regions' block of docs/security.md has no one %q", users)
	}
	block = strings.Replace(block, users, users+"    {user: harness, password: harness-pw-1Qa}\n", 1)
	sc := supercluster.StartWith(t, supercluster.Options{Config: block + "\nno_auth_user: harness\n"}, "east", "west")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := map[string]*testenv.LogBuffer{}
	ds := map[string]*Dispenser{}
	for _, region := range []string{"east", "west"} { // east first: west then reads east's record
		cfg := withBlocks(withRegions(t, testConfig(sc.Cluster(region).URL, ""), region, eastWest))
		cfg.NATSUser, cfg.NATSPassword = "dispenser-"+region, passwords[region]
		cfg.LeaseTTL = 3 * time.Second // renewals within the test
		cfg.Sequences = homedSequences // per-name endpoints and <prefix>.seq.*.home
		logs[region] = &testenv.LogBuffer{}
		d, err := Start(ctx, cfg, WithLogger(logs[region].Logger(slog.LevelDebug)))
		if err != nil {
			t.Fatalf("the %s dispenser user cannot start a dispenser: %v\n%s", region, err, logs[region].String())
		}
		t.Cleanup(func() { shutdown(t, d) })
		if r := regionOf(t, uint64(d.WorkerID())<<uidcore.DefaultLayout().SeqBits); r != region {
			t.Fatalf("the %s dispenser holds worker ID %d, of %s", region, d.WorkerID(), r)
		}
		ds[region] = d
	}
	if log := logs["west"].String(); strings.Contains(log, "could not read the fleet record of another region") || strings.Contains(log, "another region has no fleet record yet") {
		t.Fatalf("west did not compare east's fleet record:\n%s", log)
	}

	// Each region's lease renewed in its own bucket, its blocks in its
	// own stream (read as the harness user).
	for region, d := range ds {
		js, err := jetstream.New(sc.Cluster(region).Connect(t))
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(ctx, "uid_workers_"+region)
		if err != nil {
			t.Fatal(err)
		}
		key := "lease." + strconv.FormatUint(d.WorkerID(), 10)
		first, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s's lease %s: %v", region, key, err)
		}
		testenv.WaitFor(t, 10*time.Second, region+"'s lease renewed in its bucket", func() bool {
			e, err := kv.Get(ctx, key)
			return err == nil && e.Revision() > first.Revision()
		})
		testenv.WaitFor(t, 10*time.Second, region+"'s blocks in its stream", func() bool {
			s, err := js.Stream(ctx, protocol.DefaultBlocksStream+"_"+region)
			if err != nil {
				return false
			}
			info, err := s.Info(ctx)
			return err == nil && info.State.Msgs > 0
		})
	}

	// The service user calls uid.next in both regions and is served by
	// the region it calls.
	var all []uint64
	for _, region := range []string{"east", "west"} {
		var log testenv.LogBuffer
		conn, err := natsconn.Connect(ctx, natsconn.Config{URL: sc.Cluster(region).URL, User: "service", Password: servicePassword, Logger: log.Logger(slog.LevelDebug)})
		if err != nil {
			t.Fatalf("connect as service to %s: %v", region, err)
		}
		t.Cleanup(conn.Close)
		ids := takeIDs(ctx, t, uidclient.New(conn.Conn, uidclient.Config{}), 2, 20, 100)
		for _, id := range ids {
			if r := regionOf(t, id); r != region {
				t.Fatalf("the service user in %s was served by %s", region, r)
			}
		}
		all = append(all, ids...)
	}
	testenv.CheckDistinct(t, all)
	// A sequence homed in east, called in west (as the harness user: the
	// service role has no sequences), is answered by east through the
	// gateway.
	harness := uidclient.New(sc.Cluster("west").Connect(t), uidclient.Config{})
	if n, inst, err := harness.SeqNextFrom(ctx, "orders"); err != nil || inst != ds["east"].ServiceID() {
		t.Fatalf("orders@east called in west: %d from %q, %v; want east's instance %s", n, inst, err, ds["east"].ServiceID())
	}
	for region, log := range logs {
		if strings.Contains(log.String(), "Permissions Violation") {
			t.Fatalf("the %s dispenser user lacks a permission:\n%s", region, log.String())
		}
	}

	// East's dispenser user may not touch west's store: not its leases
	// (claim, renew, read), not create or change its bucket or blocks
	// stream, not publish west's blocks.
	var eastLog testenv.LogBuffer
	east, err := natsconn.Connect(ctx, natsconn.Config{URL: sc.Cluster("east").URL, User: "dispenser-east", Password: passwords["east"], Logger: eastLog.Logger(slog.LevelDebug)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(east.Close)
	westLease := "lease." + strconv.FormatUint(ds["west"].WorkerID(), 10)
	for _, subject := range []string{
		"$KV.uid_workers_west." + westLease, "$KV.uid_workers_west.fleet",
		"$JS.API.DIRECT.GET.KV_uid_workers_west.$KV.uid_workers_west." + westLease,
		"$JS.API.STREAM.MSG.GET.KV_uid_workers_west", "$JS.API.STREAM.CREATE.KV_uid_workers_west",
		"$JS.API.CONSUMER.CREATE.KV_uid_workers_west.x", "$JS.API.STREAM.INFO.UID_BLOCKS_west",
		"$JS.API.STREAM.UPDATE.UID_BLOCKS_west", "uid.blocks.west", "uid.next",
	} {
		if err := east.Conn.Publish(subject, nil); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, &eastLog, `Permissions Violation for Publish to \"`+subject+`\"`)
	}
}
