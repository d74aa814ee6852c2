// Package dashboards is the Grafana dashboard of uid-dispenser as Go code
// (the grafana-foundation-sdk builders): Build makes it, and
// `make dashboards` (dashboards/gen) writes it to
// compose/grafana/uid-dispenser.json, which Compose provisions into
// Grafana and operators import elsewhere. The test checks that the
// committed file is what Build makes, that every panel says what it shows,
// and that every query parses as PromQL and names only metrics and labels
// a running dispenser exports.
package dashboards

//lint:file-ignore SA1019 the SDK deprecates the classic dashboard model for dashboardv2, but the classic JSON is what Grafana file provisioning (and every Grafana before 12) loads.

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's uid, stable so links and provisioning survive a
// regeneration.
const UID = "uid-dispenser"

// Variables the queries use. sel is the label selector every query of a
// dispenser metric carries: the instance (Prometheus's target label), the
// subject prefix (a target label the scrape configuration sets, since a
// fleet's prefix is a deployment setting, not something each series
// carries) and the region (uid_region, on every series of an instance
// with DISPENSER_REGION; "All" matches instances without one too, since
// .* matches a missing label).
const (
	dsVar     = "datasource"
	prefixVar = "prefix"
	regionVar = "region"
	instVar   = "instance"
	sel       = `instance=~"$instance", subject_prefix=~"$prefix", uid_region=~"$region"`
	// idEndpoints are the endpoints that hand out snowflake IDs (the
	// sequence endpoints hand out numbers, counted in the same metric).
	idEndpoints  = `uid_endpoint=~"next|batch"`
	seqEndpoints = `uid_endpoint=~"seq_next|seq_batch"`
	// rate is the window of every rate: Grafana's, at least four scrapes.
	rate = "[$__rate_interval]"
)

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + dsVar + "}")}

// query is one PromQL target with its legend.
type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr, legend} }

// series is a time-series panel of width w (of 24) with its queries.
func series(title, description, unit string, w uint32, queries ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource).Span(w).Height(8).Min(0)
	for i, qu := range queries {
		p.WithTarget(target(i, qu))
	}
	return p
}

// single is a stat panel: the current value of its query.
func single(title, description, unit string, qu query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource).Span(6).Height(4).WithTarget(target(0, qu))
}

func target(i int, qu query) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(string(rune('A' + i))).Expr(qu.expr).LegendFormat(qu.legend).Datasource(datasource)
}

// quantile is the q-quantile of a histogram's buckets per label by.
func quantile(qt float64, bucket, matchers, by string) string {
	return fmt.Sprintf(`histogram_quantile(%g, sum by (le, %s) (rate(%s{%s, %s}%s)))`, qt, by, bucket, sel, matchers, rate)
}

// Build makes the dashboard.
func Build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("uid-dispenser").
		Uid(UID).
		Description("Unique 64-bit IDs over NATS: what the dispenser instances issue, their capacity, replies, ring, worker-ID leases, runway, sequences, blocks and padding. Panels read the dispenser's /metrics (docs/observability.md); alerts are compose/prometheus/alerts.yml, their runbook docs/operations.md.").
		Tags([]string{"uid-dispenser", "nats"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneUtc).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(dsVar).Label("Data source").Type("prometheus")).
		WithVariable(labelVariable(prefixVar, "Subject prefix", `label_values(uid_requests_total, subject_prefix)`,
			"The fleet's DISPENSER_SUBJECT_PREFIX, as the scrape configuration labels its targets (subject_prefix).")).
		WithVariable(labelVariable(regionVar, "Region", `label_values(uid_lanes{subject_prefix=~"$prefix"}, uid_region)`,
			"The regions (DISPENSER_REGION, exported as uid_region) to show; a fleet without regions has none, and All shows it.")).
		WithVariable(labelVariable(instVar, "Instance", `label_values(uid_lanes{subject_prefix=~"$prefix", uid_region=~"$region"}, instance)`,
			"The dispenser instances (Prometheus targets) to show."))
	for _, row := range rows() {
		b.WithRow(dashboard.NewRowBuilder(row.title))
		for _, p := range row.panels {
			b.WithPanel(p)
		}
	}
	d, err := b.Build()
	if err != nil {
		return d, err
	}
	// Ids must be unique within the dashboard (links and the panel editor
	// use them); the builders leave them unset.
	for i, p := range d.Panels {
		id := uint32(i + 1)
		if p.RowPanel != nil {
			p.RowPanel.Id = id
		} else if p.Panel != nil {
			p.Panel.Id = &id
		}
	}
	return d, nil
}

// JSON is the dashboard as the committed file holds it.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, fmt.Errorf("dashboards: build: %w", err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboards: %w", err)
	}
	return append(out, '\n'), nil
}

func labelVariable(name, label, query, description string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Description(description).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).Datasource(datasource).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).IncludeAll(true).AllValue(".*").
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}})
}

type row struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

func rows() []row {
	return []row{
		{"Overview", []cog.Builder[dashboard.Panel]{
			single("Instances", "Dispenser instances scraped (each exports uid_lanes while it holds a worker ID).", "short",
				q(`count(uid_lanes{`+sel+`})`, "")),
			single("IDs per second", "IDs sent to requesters per second, all instances selected.", "short",
				q(`sum(rate(uid_ids_issued_total{`+sel+`, `+idEndpoints+`}`+rate+`))`, "")),
			single("Runway remaining", "Time until the layout's time field runs out (the least of the instances): after it no ID can be issued. uid_runway_warning turns 1 under DISPENSER_RUNWAY_WARNING.", "s",
				q(`min(uid_runway_remaining_seconds{`+sel+`})`, "")),
			single("503 ratio", "Share of replies that were 503 (no ID right now; clients retry on another instance) over the rate interval.", "percentunit",
				q(`sum(rate(uid_requests_total{`+sel+`, uid_outcome="unavailable"}`+rate+`)) / sum(rate(uid_requests_total{`+sel+`}`+rate+`))`, "")),
		}},
		{"Issued", []cog.Builder[dashboard.Panel]{
			series("IDs issued per second", "IDs sent to requesters (uid.next and uid.batch) per second, per instance and in total.", "short", 12,
				q(`sum by (instance) (rate(uid_ids_issued_total{`+sel+`, `+idEndpoints+`}`+rate+`))`, "{{instance}}"),
				q(`sum(rate(uid_ids_issued_total{`+sel+`, `+idEndpoints+`}`+rate+`))`, "total")),
			series("Capacity against demand", "What the lanes held sustain at wall-clock pace (uid_capacity_per_second: 2^sequence bits per lane) against the IDs taken from the ring: requests, blocks, and at low load the stale IDs DISPENSER_MAX_LAG discards and refills (uid_generator_issued_total counts those too, so demand reads high when load is low; near capacity there are none). Demand near capacity claims another lane; at DISPENSER_MAX_LANES it throttles.", "short", 12,
				q(`sum by (instance) (uid_capacity_per_second{`+sel+`})`, "capacity {{instance}}"),
				q(`sum by (instance) (rate(uid_generator_issued_total{`+sel+`}`+rate+`))`, "demand {{instance}}")),
			series("Lanes held", "Worker IDs (lanes) each instance holds; more are claimed while demand needs them and given back after DISPENSER_LANE_IDLE.", "short", 8,
				q(`sum by (instance) (uid_lanes{`+sel+`})`, "{{instance}}")),
			series("Lanes claimed and given back", "Extra lanes claimed under demand and given back when idle, per rate interval.", "short", 8,
				q(`sum by (instance) (increase(uid_lanes_claimed_total{`+sel+`}`+rate+`))`, "claimed {{instance}}"),
				q(`sum by (instance) (increase(uid_lanes_released_total{`+sel+`}`+rate+`))`, "given back {{instance}}")),
			series("Throttling", "Episodes of demand above what the instance sustains (logged at warn as they start and end) and the bulk requests that waited in them.", "short", 8,
				q(`sum by (instance) (increase(uid_throttle_episodes_total{`+sel+`}`+rate+`))`, "episodes {{instance}}"),
				q(`sum by (instance) (increase(uid_throttle_waits_total{`+sel+`}`+rate+`))`, "waits {{instance}}")),
		}},
		{"Replies", []cog.Builder[dashboard.Panel]{
			series("Replies by outcome", "Replies per second by outcome: ok, bad_request (400, do not retry), not_found (404, unknown sequence), unavailable (503, retry), internal (500).", "reqps", 8,
				q(`sum by (uid_outcome) (rate(uid_requests_total{`+sel+`}`+rate+`))`, "{{uid_outcome}}")),
			series("503s by reason", "503 replies per endpoint, and the ring's rejected takes by reason (empty: the ring ran dry; claim_lost: the worker ID was lost and is being replaced; canceled, closed), which are what a 503 of uid.next and uid.batch comes from.", "reqps", 8,
				q(`sum by (uid_endpoint) (rate(uid_requests_total{`+sel+`, uid_outcome="unavailable"}`+rate+`))`, "503 {{uid_endpoint}}"),
				q(`sum by (uid_reject_reason) (rate(uid_take_rejections_total{`+sel+`}`+rate+`))`, "take rejected: {{uid_reject_reason}}")),
			series("400s", "Bad requests per endpoint (a count that is not a number or above DISPENSER_MAX_BATCH, an ID that does not parse): a client to fix, not the service.", "reqps", 8,
				q(`sum by (uid_endpoint) (rate(uid_requests_total{`+sel+`, uid_outcome="bad_request"}`+rate+`))`, "{{uid_endpoint}}")),
			series("Request latency p50", "Median time from receiving a request to handing its reply to the connection, per endpoint.", "s", 12,
				q(quantile(0.5, "uid_request_duration_seconds_bucket", `uid_outcome=~".*"`, "uid_endpoint"), "{{uid_endpoint}}")),
			series("Request latency p99", "99th percentile of the request time per endpoint. Bulk requests at capacity wait up to DISPENSER_TAKE_WAIT; sequence requests wait for a segment from the store.", "s", 12,
				q(quantile(0.99, "uid_request_duration_seconds_bucket", `uid_outcome=~".*"`, "uid_endpoint"), "{{uid_endpoint}}")),
		}},
		{"Ring, lease and clock", []cog.Builder[dashboard.Panel]{
			series("Ring fill", "IDs ready in the ring as a fraction of its size; padding refills it under DISPENSER_PADDING_FACTOR. Near 0 under load means padding cannot keep up (see capacity).", "percentunit", 8,
				q(`uid_ring_fill_ratio{`+sel+`}`, "{{instance}} worker {{uid_worker_id}}")),
			series("Lease time remaining", "Time left on each instance's worker-ID lease; renewed every third of DISPENSER_LEASE_TTL, so it saws between two thirds and all of it. A steady fall means renewals fail.", "s", 8,
				q(`uid_lease_remaining_seconds{`+sel+`}`, "{{instance}} worker {{uid_worker_id}}")),
			series("Clock ahead", "How far the newest ID in the ring runs ahead of the wall clock: borrowed future seconds, bounded by DISPENSER_MAX_AHEAD (2s by default).", "s", 8,
				q(`uid_clock_ahead_seconds{`+sel+`}`, "{{instance}} worker {{uid_worker_id}}")),
			series("Runway remaining", "Time until the layout's time field is exhausted, per instance (all instances of a fleet share the layout).", "s", 12,
				q(`min by (instance) (uid_runway_remaining_seconds{`+sel+`})`, "{{instance}}")),
			series("Runway warning", "1 while the runway is under DISPENSER_RUNWAY_WARNING (the dispenser also logs it once a day).", "short", 12,
				q(`max by (instance) (uid_runway_warning{`+sel+`})`, "{{instance}}")),
			series("Store regressions", "Times an instance found the worker-ID store answering with records older than it had acknowledged (a power loss under lazy fsync, a lossy failover), per rate interval: lease (the owner stopped issuing under that worker ID and claimed another) or sequence (the counter was raised back past the numbers handed out). Anything above 0 is an incident: alert UIDStoreRegression.", "short", 24,
				q(`sum by (instance, record) (increase(uid_store_regressions_total{`+sel+`}`+rate+`))`, "{{record}} {{instance}}")),
		}},
		{"Sequences", []cog.Builder[dashboard.Panel]{
			series("Sequence numbers handed out", "Numbers of the named sequences handed out per second, by endpoint (uid.seq.<name>.next and .batch).", "short", 8,
				q(`sum by (uid_endpoint) (rate(uid_ids_issued_total{`+sel+`, `+seqEndpoints+`}`+rate+`))`, "{{uid_endpoint}}")),
			series("Sequence requests waiting for a segment", "p99 of the sequence requests' time: a request finds its numbers in memory in microseconds, so a p99 of milliseconds means requests waited for a segment from the store (a first request, an exhausted segment, a slow or unreachable store).", "s", 8,
				q(quantile(0.99, "uid_request_duration_seconds_bucket", seqEndpoints, "uid_endpoint"), "p99 {{uid_endpoint}}")),
			series("Sequence 503s", "Sequence requests answered 503: no segment arrived within the wait, or too many requests already wait for one.", "reqps", 8,
				q(`sum by (uid_endpoint) (rate(uid_requests_total{`+sel+`, `+seqEndpoints+`, uid_outcome="unavailable"}`+rate+`))`, "{{uid_endpoint}}")),
			series("Segment waits", "Sequence requests that found too few numbers at hand and waited for a segment from the store, per rate interval, by sequence. A name's first request on an instance always waits; the next segment, taken in the background once 10% of the current one is used, should make later waits rare.", "short", 8,
				q(`sum by (instance, uid_sequence) (increase(uid_sequence_waits_total{`+sel+`}`+rate+`))`, "{{uid_sequence}} {{instance}}")),
			series("Mean segment wait", "How long a request that waited for a segment waited, on average over the rate interval, by sequence: the latency the store adds (a healthy store answers within a few milliseconds; a wait near DISPENSER_TAKE_WAIT ends in a 503).", "s", 8,
				q(`sum by (instance, uid_sequence) (increase(uid_sequence_wait_time_seconds_total{`+sel+`}`+rate+`)) / sum by (instance, uid_sequence) (increase(uid_sequence_waits_total{`+sel+`}`+rate+`))`, "{{uid_sequence}} {{instance}}")),
			series("Remainder of the current segment", "Numbers left in each sequence's current segment, per instance, and in all it holds (with the segment taken ahead). The segments adapt so that one lasts about DISPENSER_SEQUENCE_TARGET.", "short", 8,
				q(`sum by (instance, uid_sequence) (uid_sequence_left{`+sel+`})`, "left {{uid_sequence}} {{instance}}"),
				q(`sum by (instance, uid_sequence) (uid_sequence_held{`+sel+`})`, "held {{uid_sequence}} {{instance}}")),
		}},
		{"Blocks", []cog.Builder[dashboard.Panel]{
			series("Blocks stream depth", "Blocks in the stream at each publisher's last check (DISPENSER_BLOCKS_ENABLED); the publishers top it up to DISPENSER_BLOCKS_TARGET_DEPTH. At 0 check after check, consumers drain it faster than it is refilled (alert UIDBlocksStreamEmpty).", "short", 12,
				q(`max by (instance) (uid_blocks_depth{`+sel+`})`, "{{instance}}")),
			series("Block publishes", "Blocks stored per second, and those refused because the stream was full: the normal end of a top-up round (their IDs are discarded, never handed out), or given up after errors.", "short", 12,
				q(`sum by (instance) (rate(uid_blocks_published_total{`+sel+`}`+rate+`))`, "stored {{instance}}"),
				q(`sum by (instance) (rate(uid_blocks_refused_total{`+sel+`}`+rate+`))`, "refused (full) {{instance}}"),
				q(`sum by (instance) (rate(uid_blocks_failed_total{`+sel+`}`+rate+`))`, "failed {{instance}}")),
			series("Store pressure", "Blocks refused because JetStream had no room (the stream's max_bytes, the server's store, the account's limits), per rate interval; the publisher backs off up to a second and logs one warning an episode.", "short", 12,
				q(`sum by (instance) (increase(uid_blocks_pressure_total{`+sel+`}`+rate+`))`, "{{instance}}")),
			series("IDs taken beyond replies", "IDs taken from the ring beyond those sent to requesters: the IDs published in blocks (DISPENSER_BLOCKS_ENABLED, including those of refused or failed blocks) plus, at low load, the stale IDs discarded under DISPENSER_MAX_LAG (a dispenser without blocks shows only those).", "short", 12,
				q(`sum by (instance) (rate(uid_generator_issued_total{`+sel+`}`+rate+`)) - sum by (instance) (rate(uid_ids_issued_total{`+sel+`, `+idEndpoints+`}`+rate+`))`, "{{instance}}")),
		}},
		{"Padding", []cog.Builder[dashboard.Panel]{
			series("Padding duration", "p50 and p99 of a padding round's time, by trigger (startup, threshold, schedule, freshness: refilling IDs that lagged the clock, forced).", "s", 8,
				q(quantile(0.5, "uid_padding_duration_seconds_bucket", `uid_padding_trigger=~".*"`, "uid_padding_trigger"), "p50 {{uid_padding_trigger}}"),
				q(quantile(0.99, "uid_padding_duration_seconds_bucket", `uid_padding_trigger=~".*"`, "uid_padding_trigger"), "p99 {{uid_padding_trigger}}")),
			series("Padding rounds by stop", "Padding rounds per second by what stopped them: full (the ring is full) or the put rejection's reason (ahead_of_clock_bound at capacity, time_exhausted past the runway, claim, slot_busy).", "short", 8,
				q(`sum by (uid_padding_stop) (rate(uid_padding_rounds_total{`+sel+`}`+rate+`))`, "{{uid_padding_stop}}")),
			series("IDs padded and puts rejected", "IDs put into the ring per second, and rejected puts by reason.", "short", 8,
				q(`sum by (instance) (rate(uid_padding_ids_total{`+sel+`}`+rate+`))`, "padded {{instance}}"),
				q(`sum by (uid_reject_reason) (rate(uid_put_rejections_total{`+sel+`}`+rate+`))`, "put rejected: {{uid_reject_reason}}")),
		}},
	}
}
