package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

// secretsInBadValues are the passwords the cases below put in bad
// values; no output may show them.
var secretsInBadValues = []string{"hunter2", "s3cret-pw", "t0ken-value"}

// TestEveryInvalidSettingStopsStartUpNamingIt runs the dispenser binary
// with one bad value per configuration variable (every variable that
// `dispenser -h` lists must have a case) and expects exit 2 with a
// message on stderr that names the variable, and no secret in it.
func TestEveryInvalidSettingStopsStartUpNamingIt(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := file("garbage.pem", "not a key, not a certificate\n")
	certFile := testenv.TLS(t).ClientCert
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	missing := filepath.Join(dir, "missing.file")

	// One or more bad values per variable, each with the other variables
	// it needs to be reached.
	type badValue struct {
		value string
		also  []string
	}
	cases := map[string][]badValue{
		"NATS_URL":             {{"nats://127.0.0.1:99999", nil}, {"ftp://127.0.0.1:21", nil}, {"nats://u:s3cret-pw@host:port", nil}, {"nats://a:4222,,nats://b:4222", nil}},
		"NATS_USER":            {{"alice", []string{"DISPENSER_NATS_TOKEN=t0ken-value"}}},
		"NATS_PASSWORD":        {{"hunter2", nil}},
		"NATS_TOKEN":           {{"t0ken-value", []string{"DISPENSER_NATS_CREDS_FILE=" + garbage}}},
		"NATS_NKEY_SEED_FILE":  {{missing, nil}, {garbage, nil}, {file("account.nk", string(accountSeed)), nil}, {dir, nil}},
		"NATS_CREDS_FILE":      {{missing, nil}, {file("seed-only.creds", string(userSeed)), nil}},
		"NATS_TLS_CA":          {{missing, nil}, {garbage, nil}},
		"NATS_TLS_CERT":        {{certFile, nil}, {garbage, []string{"DISPENSER_NATS_TLS_KEY=" + garbage}}},
		"NATS_TLS_KEY":         {{garbage, []string{"DISPENSER_NATS_TLS_CERT=" + certFile}}},
		"NATS_CONNECT_TIMEOUT": {{"0s", nil}, {"soon", nil}},
		"NATS_PING_INTERVAL":   {{"0s", nil}, {"-2s", nil}, {"often", nil}},
		"EMBEDDED_ADDR":        {{"localhost", nil}, {"127.0.0.1:70000", nil}},
		"EMBEDDED_DATA_DIR":    {{garbage, nil}, {filepath.Join(garbage, "nats"), nil}},
		"LAYOUT":               {{"snowflake", nil}, {"uidgenerator", nil}, {"31/16/16", []string{"DISPENSER_TIME_BITS=31"}}},
		"TIME_BITS":            {{"many", nil}, {"19", nil}},
		"WORKER_BITS":          {{"-1", nil}, {"0", nil}},
		"SEQ_BITS":             {{"0", nil}, {"23", nil}},
		"EPOCH":                {{"yesterday", nil}, {"1960-01-01T00:00:00Z", nil}, {"2999-01-01T00:00:00Z", nil}},
		"BOOST_POWER":          {{"25", nil}},
		"RING_MEMORY":          {{"100", nil}, {"1GB", nil}},
		"MAX_LANES":            {{"0", nil}, {"1025", nil}},
		"LANE_IDLE":            {{"10ms", nil}},
		"PADDING_FACTOR":       {{"0", nil}, {"101", nil}},
		"SCHEDULE_INTERVAL":    {{"-1s", nil}},
		"MAX_AHEAD":            {{"500ms", nil}},
		"MAX_LAG":              {{"200ms", nil}},
		"TAKE_WAIT":            {{"-1ms", nil}},
		"QUEUE_GROUP":          {{"a b", nil}},
		"SUBJECT_PREFIX":       {{"uid.*", nil}, {"", nil}},
		"MAX_BATCH":            {{"0", nil}},
		"SHUTDOWN_TIMEOUT":     {{"0s", nil}},
		"LOG_LEVEL":            {{"loud", nil}},
		"LOG_FORMAT":           {{"xml", nil}},
		"METRICS_ADDR":         {{"9464", nil}, {"localhost:http-alt", nil}},
		"SEQUENCES": {{"orders,,invoices", nil}, {"a.b", nil}, {"orders=-1", nil}, {"orders,orders", nil}, {"orders@east", nil},
			{"orders", []string{"DISPENSER_REGION=east", "DISPENSER_REGIONS=east=0-511,west=512-1023"}},
			{"orders@north", []string{"DISPENSER_REGION=east", "DISPENSER_REGIONS=east=0-511,west=512-1023"}}},
		"SEQUENCE_STEP":           {{"0", nil}, {"many", nil}},
		"SEQUENCE_MAX_STEP":       {{"10", nil}},
		"SEQUENCE_TARGET":         {{"10ms", nil}},
		"SEQUENCE_TABLE":          {{"drop table", nil}, {"UID_FLEET", nil}},
		"RUNWAY_WARNING":          {{"soon", nil}, {"-1y", nil}, {"100y", nil}},
		"MYSQL_DSN":               {{"root:hunter2@nowhere(", nil}, {"root:hunter2@tcp(127.0.0.1:3306)/db?tls=custom", nil}},
		"WORKER_MODE":             {{"borrowed", nil}},
		"LEASE_TTL":               {{"500ms", nil}},
		"RESERVE_CHUNK":           {{"500ms", nil}}, // 0s is the default, as in workerid.Config
		"WORKER_NODE_TABLE":       {{"1table", nil}},
		"WORKER_LEASE_TABLE":      {{"drop table", nil}, {"WORKER_NODE", nil}},
		"CREATE_TABLES":           {{"maybe", nil}},
		"FLEET_TABLE":             {{"drop table", nil}, {"WORKER_NODE", nil}},
		"WORKER_KV_BUCKET":        {{"a.b", nil}},
		"WORKER_KV_REPLICAS":      {{"-1", nil}, {"6", nil}},
		"STORE_STARTUP_DEADLINE":  {{"soon", nil}}, // negative is one attempt
		"STORE_LOSS_WINDOW":       {{"soon", nil}}, // 0 or negative: no loss
		"STORE_DURABILITY":        {{"maybe", nil}},
		"REGION":                  {{"north", []string{"DISPENSER_REGIONS=east=0-511,west=512-1023"}}, {"east", nil}},
		"REGIONS":                 {{"east=0-511,west=511-1023", []string{"DISPENSER_REGION=east"}}, {"east=0-2047", []string{"DISPENSER_REGION=east"}}, {"east=0-511,", nil}},
		"BLOCKS_ENABLED":          {{"perhaps", nil}},
		"BLOCKS_STREAM":           {{"a.b", nil}},
		"BLOCKS_SUBJECT":          {{"uid.*", nil}, {"uid..blocks", []string{"DISPENSER_BLOCKS_ENABLED=true"}}},
		"BLOCKS_BLOCK_SIZE":       {{"5000000", nil}, {"200000", []string{"DISPENSER_BLOCKS_BINARY=true"}}, {"-1", nil}},
		"BLOCKS_BINARY":           {{"perhaps", nil}},
		"BLOCKS_TARGET_DEPTH":     {{"-1", nil}},
		"BLOCKS_STORAGE":          {{"disk", nil}},
		"BLOCKS_REPLICAS":         {{"9", nil}},
		"BLOCKS_DUPLICATE_WINDOW": {{"10ms", nil}},
		"BLOCKS_POLL_INTERVAL":    {{"1us", nil}},
	}

	var usage bytes.Buffer
	if err := dispenser.Usage(&usage); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+DISPENSER_([A-Z0-9_]+) \(`).FindAllStringSubmatch(usage.String(), -1) {
		listed[m[1]] = true
		if len(cases[m[1]]) == 0 {
			t.Errorf("DISPENSER_%s has no bad-value case here", m[1])
		}
	}
	if len(listed) < 40 {
		t.Fatalf("only %d variables found in the usage:\n%s", len(listed), usage.String())
	}
	for name := range cases {
		if !listed[name] {
			t.Errorf("case for DISPENSER_%s, which dispenser -h does not list", name)
		}
	}

	// A server that a dispenser accepting a bad value would reach (and
	// then be stopped by the timeout, failing the case).
	natsURL := testenv.NATS(t, nil).ClientURL()
	for name, values := range cases {
		for _, bv := range values {
			variable := "DISPENSER_" + name
			t.Run(variable+"="+bv.value, func(t *testing.T) {
				t.Parallel()
				env := append([]string{"DISPENSER_NATS_URL=" + natsURL}, bv.also...)
				env = append(env, variable+"="+bv.value)
				cmd := command(t, nil, env...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				accepted := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
				err := cmd.Wait()
				if !accepted.Stop() {
					t.Fatalf("still running after 20s: the bad value was accepted; output:\n%s", out.String())
				}
				if code := exitCode(err); code != 2 {
					t.Fatalf("exit %d, want 2; output:\n%s", code, out.String())
				}
				msg := out.String()
				if !strings.Contains(msg, "dispenser: configuration: ") || !strings.Contains(msg, variable) && !layoutGroupNamed(msg, name) {
					t.Fatalf("the message does not name %s:\n%s", variable, msg)
				}
				for _, secret := range secretsInBadValues {
					if strings.Contains(msg, secret) {
						t.Fatalf("the message shows the secret %q:\n%s", secret, msg)
					}
				}
			})
		}
	}
}

// layoutGroupNamed: the bit widths share one name when only their sum is
// wrong.
func layoutGroupNamed(msg, name string) bool {
	switch name {
	case "TIME_BITS", "WORKER_BITS", "SEQ_BITS":
		return strings.Contains(msg, "DISPENSER_TIME_BITS/WORKER_BITS/SEQ_BITS")
	}
	return false
}
