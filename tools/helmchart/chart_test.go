package helmchart

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
)

const chartDir = "../../deploy/helm/uid-dispenser"

// secretsDir is where the chart mounts the files of Secrets.
const secretsDir = "/etc/uid-dispenser"

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	return c
}

// manifests is a rendered chart, decoded.
type manifests struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	serviceAccount *corev1.ServiceAccount
	serviceMonitor *monitoringv1.ServiceMonitor
}

// render renders the chart with vals as helm install would (values
// coalesced with values.yaml and validated against the schema) and
// decodes every manifest strictly.
func render(t *testing.T, c *chart.Chart, vals map[string]any) (manifests, error) {
	t.Helper()
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "ids", Namespace: "uid", IsInstall: true}, nil)
	if err != nil {
		return manifests{}, err
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return manifests{}, err
	}
	var m manifests
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
				continue
			}
			if err := decodeManifest(doc, &m); err != nil {
				t.Errorf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	return m, nil
}

// decodeManifest decodes one YAML manifest into the API type of its kind,
// refusing unknown fields.
func decodeManifest(doc string, m *manifests) error {
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return err
	}
	var into any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		m.deployment = &appsv1.Deployment{}
		into = m.deployment
	case "v1 Service":
		m.service = &corev1.Service{}
		into = m.service
	case "policy/v1 PodDisruptionBudget":
		m.pdb = &policyv1.PodDisruptionBudget{}
		into = m.pdb
	case "v1 ServiceAccount":
		m.serviceAccount = &corev1.ServiceAccount{}
		into = m.serviceAccount
	case "monitoring.coreos.com/v1 ServiceMonitor":
		m.serviceMonitor = &monitoringv1.ServiceMonitor{}
		into = m.serviceMonitor
	default:
		return fmt.Errorf("a %s %s, which the test does not know", tm.APIVersion, tm.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return nil
}

// mustRender renders and fails the test on an error.
func mustRender(t *testing.T, vals map[string]any) manifests {
	t.Helper()
	m, err := render(t, loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	if m.deployment == nil || m.service == nil {
		t.Fatalf("no Deployment or Service rendered: %+v", m)
	}
	return m
}

// envOf is the container's environment by name.
func envOf(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		env[e.Name] = e
	}
	return env
}

// known is every DISPENSER_ variable the dispenser reads, with its default.
func known() map[string]string {
	vars := map[string]string{}
	for _, v := range dispenser.Variables() {
		vars[v.Name] = v.Default
	}
	return vars
}

func TestDefaultValuesRender(t *testing.T) {
	m := mustRender(t, nil)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	pod := d.Spec.Template
	for k, v := range d.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pods (%v)", k, v, pod.Labels)
		}
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := envOf(c)
	vars := known()
	for name := range env {
		if _, ok := vars[name]; strings.HasPrefix(name, "DISPENSER_") && !ok {
			t.Errorf("the chart sets %s, which the dispenser does not read", name)
		}
	}
	// The worker-ID store and the telemetry resource name the instance by
	// its pod.
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME is %+v, want the pod's metadata.name", e)
	}
	if e := env["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP is %+v, want the pod's status.podIP", e)
	}
	if !strings.Contains(env["OTEL_RESOURCE_ATTRIBUTES"].Value, "service.instance.id=$(POD_NAME)") {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES=%q does not name the instance by its pod", env["OTEL_RESOURCE_ATTRIBUTES"].Value)
	}
	if env["DISPENSER_NATS_URL"].Value == "" {
		t.Error("no DISPENSER_NATS_URL")
	}
	if _, ok := env["DISPENSER_MYSQL_DSN"]; ok {
		t.Error("DISPENSER_MYSQL_DSN set without a Secret")
	}
	// Metrics: the address the dispenser listens on is the container's
	// port, the probes' and the Service's.
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" {
		t.Fatalf("ports %+v", c.Ports)
	}
	port := c.Ports[0].ContainerPort
	if got := env["DISPENSER_METRICS_ADDR"].Value; got != ":"+strconv.Itoa(int(port)) {
		t.Errorf("DISPENSER_METRICS_ADDR=%q, container port %d", got, port)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %+v, want GET %s on the metrics port", probe, want)
		}
	}
	if sp := m.service.Spec.Ports; len(sp) != 1 || sp[0].Port != port || sp[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v, want %d to the metrics port", sp, port)
	}
	for k, v := range m.service.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, not on the pods", k, v)
		}
	}
	// A graceful stop fits in the grace period.
	shutdown, err := time.ParseDuration(env["DISPENSER_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Fatal(err)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v, want well above DISPENSER_SHUTDOWN_TIMEOUT %v", g, shutdown)
	}
	if m.pdb == nil || m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", m.pdb)
	} else if !selects(m.pdb.Spec.Selector, pod.Labels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the pods", m.pdb.Spec.Selector)
	}
	if len(pod.Spec.TopologySpreadConstraints) != 2 {
		t.Errorf("topology spread %+v, want zone and host", pod.Spec.TopologySpreadConstraints)
	}
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if !selects(tsc.LabelSelector, pod.Labels) {
			t.Errorf("topology spread over %s selects %v, not the pods", tsc.TopologyKey, tsc.LabelSelector)
		}
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v, want a read-only root", c.SecurityContext)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory limit")
	}
	if m.serviceMonitor != nil {
		t.Error("a ServiceMonitor by default, which needs prometheus-operator's CRDs")
	}
	loadsAsConfig(t, env)
}

// loadsAsConfig sets the DISPENSER_ variables the chart renders (a
// stand-in for each one read from a Secret, which the chart cannot know)
// and has the dispenser load its configuration from them: every value the
// chart passes must be one the dispenser accepts.
func loadsAsConfig(t *testing.T, env map[string]corev1.EnvVar) {
	t.Helper()
	for _, v := range dispenser.Variables() {
		t.Setenv(v.Name, "")
		os.Unsetenv(v.Name)
	}
	var tlsFiles *testenv.TLSFiles
	stand := map[string]string{"DISPENSER_NATS_URL": "nats://nats:4222", "DISPENSER_MYSQL_DSN": "uid:secret@tcp(mysql:3306)/uid?parseTime=true"}
	for name, e := range env {
		if !strings.HasPrefix(name, "DISPENSER_") {
			continue
		}
		value := e.Value
		if e.ValueFrom != nil {
			value = cmp.Or(stand[name], "from-a-secret")
		}
		// A file mounted from a Secret (checkMounted checks the mount): a
		// real one of its kind, since the dispenser reads it at start.
		if strings.HasPrefix(value, secretsDir+"/") {
			value = realFile(t, name, &tlsFiles)
		}
		t.Setenv(name, value)
	}
	if _, err := dispenser.LoadConfig(); err != nil {
		t.Errorf("the dispenser refuses the chart's settings: %v", err)
	}
}

// realFile writes a valid file for the file variable name: TLS files, a
// NATS credentials file, an NKey seed. The TLS files are made once per
// call of loadsAsConfig (tls), so that key and certificate match.
func realFile(t *testing.T, name string, tls **testenv.TLSFiles) string {
	t.Helper()
	if strings.HasPrefix(name, "DISPENSER_NATS_TLS_") && *tls == nil {
		f := testenv.TLS(t)
		*tls = &f
	}
	switch name {
	case "DISPENSER_NATS_TLS_CA":
		return (*tls).CA
	case "DISPENSER_NATS_TLS_CERT":
		return (*tls).ClientCert
	case "DISPENSER_NATS_TLS_KEY":
		return (*tls).ClientKey
	case "DISPENSER_NATS_CREDS_FILE":
		return testenv.NewOperator(t).UserCreds(t, "dispenser")
	case "DISPENSER_NATS_NKEY_SEED_FILE":
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		file := filepath.Join(t.TempDir(), "user.nk")
		if err := os.WriteFile(file, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	t.Fatalf("no file for %s", name)
	return ""
}

func selects(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels) == 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestValuesDefaultsAreTheDispensers: values.yaml's config section holds
// the dispenser's own defaults (logFormat json aside, for log collectors),
// so a chart user reads the truth there; every key maps to a variable.
func TestValuesDefaultsAreTheDispensers(t *testing.T) {
	c := loadChart(t)
	config, _ := c.Values["config"].(map[string]any)
	if len(config) < 40 {
		t.Fatalf("config has %d settings", len(config))
	}
	env := envOf(mustRender(t, nil).deployment.Spec.Template.Spec.Containers[0])
	vars := known()
	overridden := map[string]string{"DISPENSER_LOG_FORMAT": "json"}
	// Not settings of config: where NATS and the metrics server are.
	notConfig := map[string]bool{"DISPENSER_NATS_URL": true, "DISPENSER_METRICS_ADDR": true}
	set := 0
	for name, def := range vars {
		e, ok := env[name]
		if !ok || notConfig[name] {
			continue
		}
		set++
		want := def
		if o, ok := overridden[name]; ok {
			want = o
		}
		if e.ValueFrom == nil && e.Value != want {
			t.Errorf("the chart's default %s=%q, the dispenser's %q", name, e.Value, want)
		}
	}
	// Every non-empty config value became a variable.
	nonEmpty := 0
	for _, v := range config {
		if fmt.Sprint(v) != "" {
			nonEmpty++
		}
	}
	if set != nonEmpty {
		t.Errorf("%d DISPENSER_ variables rendered from config, %d non-empty config values", set, nonEmpty)
	}
}

// full is a set of values that turns everything on.
func full() map[string]any {
	return map[string]any{
		"replicaCount":     5,
		"image":            map[string]any{"repository": "registry.example/uid-dispenser", "tag": "1.2.3", "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		"nats": map[string]any{
			"existingSecret": "nats-auth",
			"secretKeys":     map[string]any{"url": "url", "user": "user", "password": "password"},
			"tlsSecret":      map[string]any{"name": "nats-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
		},
		"mysql": map[string]any{"existingSecret": "uid-mysql", "dsnKey": "dsn"},
		"config": map[string]any{
			"layout": "31/16/16", "maxLanes": 8, "ringMemory": 16777216, "sequences": "orders,invoices=1000000",
			"subjectPrefix": "ids", "blocksEnabled": true, "blocksReplicas": 3, "workerKVReplicas": 3,
			"shutdownTimeout": "20s", "logLevel": "debug",
		},
		"extraEnv":                      []any{map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://collector:4318"}},
		"metrics":                       map[string]any{"port": 9100, "serviceMonitor": map[string]any{"enabled": true, "interval": "30s", "labels": map[string]any{"release": "kube-prometheus"}}},
		"terminationGracePeriodSeconds": 45,
		"resources":                     map[string]any{"requests": map[string]any{"cpu": "1", "memory": "128Mi"}, "limits": map[string]any{"cpu": "2", "memory": "512Mi"}},
		"podDisruptionBudget":           map[string]any{"enabled": true, "maxUnavailable": "40%"},
		"topologySpread": map[string]any{"enabled": true, "constraints": []any{map[string]any{
			"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "uid-dispenser"}},
		}}},
		"serviceAccount":    map[string]any{"create": true, "name": "uid", "annotations": map[string]any{"example.com/role": "ids"}},
		"podAnnotations":    map[string]any{"example.com/team": "platform"},
		"podLabels":         map[string]any{"tier": "ids"},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "ids", "effect": "NoSchedule"}},
		"affinity":          map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"ids"}}}}}}}},
		"priorityClassName": "high",
	}
}

func TestFullValuesRender(t *testing.T) {
	m := mustRender(t, full())
	d := m.deployment
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := envOf(c)
	if *d.Spec.Replicas != 5 || c.Image != "registry.example/uid-dispenser:1.2.3" || *pod.TerminationGracePeriodSeconds != 45 {
		t.Errorf("replicas %d, image %s, grace %d", *d.Spec.Replicas, c.Image, *pod.TerminationGracePeriodSeconds)
	}
	// Secrets come from Secrets, never as values in the manifest.
	for name, secret := range map[string]string{
		"DISPENSER_NATS_URL": "nats-auth", "DISPENSER_NATS_USER": "nats-auth", "DISPENSER_NATS_PASSWORD": "nats-auth", "DISPENSER_MYSQL_DSN": "uid-mysql",
	} {
		e := env[name]
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret {
			t.Errorf("%s is %+v, want a key of Secret %s", name, e, secret)
		}
	}
	if _, ok := env["DISPENSER_NATS_TOKEN"]; ok {
		t.Error("DISPENSER_NATS_TOKEN set with no key for it")
	}
	// Files from Secrets are mounted where the variables say.
	checkMounted(t, pod, map[string]string{
		"DISPENSER_NATS_TLS_CA": "nats-tls", "DISPENSER_NATS_TLS_CERT": "nats-tls", "DISPENSER_NATS_TLS_KEY": "nats-tls",
	})
	for name, want := range map[string]string{
		"DISPENSER_LAYOUT": "31/16/16", "DISPENSER_MAX_LANES": "8", "DISPENSER_RING_MEMORY": "16777216",
		"DISPENSER_SEQUENCES": "orders,invoices=1000000", "DISPENSER_BLOCKS_ENABLED": "true", "DISPENSER_METRICS_ADDR": ":9100",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
	} {
		if env[name].Value != want {
			t.Errorf("%s=%q, want %q", name, env[name].Value, want)
		}
	}
	loadsAsConfig(t, env)
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("topology spread %+v, want the one given", pod.TopologySpreadConstraints)
	}
	if m.pdb.Spec.MaxUnavailable.String() != "40%" {
		t.Errorf("PodDisruptionBudget maxUnavailable %v", m.pdb.Spec.MaxUnavailable)
	}
	if m.serviceAccount == nil || m.serviceAccount.Name != "uid" || pod.ServiceAccountName != "uid" {
		t.Errorf("service account %+v, pod's %q", m.serviceAccount, pod.ServiceAccountName)
	}
	sm := m.serviceMonitor
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if !selects(&sm.Spec.Selector, m.service.Labels) || sm.Labels["release"] != "kube-prometheus" {
		t.Errorf("the ServiceMonitor selects %v, the Service has %v", sm.Spec.Selector.MatchLabels, m.service.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != m.service.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	relabeled := false
	for _, r := range sm.Spec.Endpoints[0].RelabelConfigs {
		relabeled = relabeled || (r.TargetLabel == "subject_prefix" && r.Replacement != nil && *r.Replacement == "ids")
	}
	if !relabeled {
		t.Errorf("the ServiceMonitor does not label targets subject_prefix=ids: %+v", sm.Spec.Endpoints[0].RelabelConfigs)
	}
}

// checkMounted checks that each variable (name: Secret) names a file in a
// read-only mount of that Secret.
func checkMounted(t *testing.T, pod corev1.PodSpec, files map[string]string) {
	t.Helper()
	c := pod.Containers[0]
	env := envOf(c)
	mounted := map[string]string{}
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.Secret != nil && vm.ReadOnly {
				mounted[vm.MountPath] = v.Secret.SecretName
			}
		}
	}
	for name, secret := range files {
		file := env[name].Value
		if dir := file[:max(0, strings.LastIndexByte(file, '/'))]; mounted[dir] != secret {
			t.Errorf("%s=%q, but Secret %s is not mounted read-only at %q (mounts %v)", name, file, secret, dir, mounted)
		}
	}
}

// TestCredentialFilesAreMounted: a credentials file or an NKey seed
// comes from its Secret, mounted read-only where the variable points, and
// two authentication methods at once are refused with the reason.
func TestCredentialFilesAreMounted(t *testing.T) {
	for secret, variable := range map[string]string{"credsSecret": "DISPENSER_NATS_CREDS_FILE", "nkeySecret": "DISPENSER_NATS_NKEY_SEED_FILE"} {
		m := mustRender(t, map[string]any{"nats": map[string]any{secret: map[string]any{"name": "nats-file", "key": "user.file"}}})
		pod := m.deployment.Spec.Template.Spec
		checkMounted(t, pod, map[string]string{variable: "nats-file"})
		if !strings.HasSuffix(envOf(pod.Containers[0])[variable].Value, "/user.file") {
			t.Errorf("%s does not name the Secret's key user.file", variable)
		}
		loadsAsConfig(t, envOf(pod.Containers[0]))
	}
	_, err := render(t, loadChart(t), map[string]any{"nats": map[string]any{
		"existingSecret": "nats-auth", "secretKeys": map[string]any{"user": "user", "password": "password"},
		"credsSecret": map[string]any{"name": "nats-creds"},
	}})
	if err == nil || !strings.Contains(err.Error(), "one authentication method") {
		t.Errorf("user/password with a credentials file: %v, want a refusal naming one authentication method", err)
	}
}

// TestSchemaRefusesBadValues: misspelt keys and wrong types stop helm
// install with the schema's error, before anything reaches a cluster.
func TestSchemaRefusesBadValues(t *testing.T) {
	c := loadChart(t)
	for name, vals := range map[string]map[string]any{
		"a misspelt top-level key":        {"replicas": 3},
		"a misspelt setting":              {"config": map[string]any{"maxLane": 4}},
		"a duration without unit":         {"config": map[string]any{"leaseTTL": "30"}},
		"an unknown log level":            {"config": map[string]any{"logLevel": "verbose"}},
		"a string for a number":           {"config": map[string]any{"maxLanes": "four"}},
		"a bad sequence list":             {"config": map[string]any{"sequences": "a.b"}},
		"a map of regions without ranges": {"config": map[string]any{"regions": "east,west"}},
		"a region name with a dot":        {"config": map[string]any{"region": "us.east"}},
		"replicas as a string":            {"replicaCount": "3"},
		"a misspelt secret key":           {"mysql": map[string]any{"secret": "x"}},
	} {
		if _, err := render(t, c, vals); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s (%v): %v, want a schema error", name, vals, err)
		}
	}
}

// TestRegionValues: a release of one region of a supercluster sets
// DISPENSER_REGION and DISPENSER_REGIONS, and sequences with their home
// regions, which the schema and the dispenser accept.
func TestRegionValues(t *testing.T) {
	const regions, sequences = "east=0-511, west=512-1023", "orders@east,invoices@west=1000000"
	env := envOf(mustRender(t, map[string]any{"config": map[string]any{"region": "west", "regions": regions, "sequences": sequences}}).deployment.Spec.Template.Spec.Containers[0])
	if env["DISPENSER_REGION"].Value != "west" || env["DISPENSER_REGIONS"].Value != regions || env["DISPENSER_SEQUENCES"].Value != sequences {
		t.Errorf("DISPENSER_REGION=%q DISPENSER_REGIONS=%q DISPENSER_SEQUENCES=%q, want west, %s and %s",
			env["DISPENSER_REGION"].Value, env["DISPENSER_REGIONS"].Value, env["DISPENSER_SEQUENCES"].Value, regions, sequences)
	}
	loadsAsConfig(t, env)
}

// TestChartNeedsAURL: with neither URL nor Secret the render fails saying
// what to set.
func TestChartNeedsAURL(t *testing.T) {
	_, err := render(t, loadChart(t), map[string]any{"nats": map[string]any{"url": ""}})
	if err == nil || !strings.Contains(err.Error(), "nats.url") {
		t.Errorf("render without a NATS URL: %v, want an error naming nats.url", err)
	}
}
