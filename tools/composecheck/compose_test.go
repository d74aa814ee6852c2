package composecheck

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
)

// composeDir is the deployment's directory; every test runs in it, as
// docker compose would, so that the files' relative paths resolve.
const composeDir = "../../compose"

// load loads the Compose file name with compose-go, the loader docker
// compose itself uses: include and extends resolved, paths made absolute,
// the process's environment for interpolation, the schema and consistency
// checked. Every variable a file interpolates must have a default, or
// loading fails naming where. opts adjust the loader.
func load(t *testing.T, name string, opts ...func(*loader.Options)) *types.Project {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	po, err := cli.NewProjectOptions([]string{name},
		cli.WithWorkingDirectory(dir), cli.WithOsEnv,
		cli.WithLoadOptions(append([]func(*loader.Options){requireDefaults}, opts...)...))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p, err := po.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

var interpolation = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:?-[^}]*)?\}`)

// requireDefaults makes interpolation fail on a ${VAR} without a default
// (before substituting, whatever the environment holds), in the file and
// in every file it includes or extends.
func requireDefaults(o *loader.Options) {
	if o.Interpolate == nil { // reading the files, before loading
		return
	}
	o.Interpolate.Substitute = func(value string, mapping template.Mapping) (string, error) {
		for _, m := range interpolation.FindAllStringSubmatch(value, -1) {
			if m[2] == "" {
				return "", fmt.Errorf("${%s} has no default, so the file needs a variable nobody sets", m[1])
			}
		}
		return template.Substitute(value, mapping)
	}
}

// own loads only the file's own services: no include, extends kept as
// written (with the path made absolute), so no consistency check (a
// service that extends has no image of its own).
func own(o *loader.Options) {
	o.SkipInclude = true
	o.SkipExtends = true
	o.SkipConsistencyCheck = true
}

// includes lists the paths the file name includes, from its raw YAML.
func includes(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Include []struct{ Path string } `yaml:"include"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var paths []string
	for _, inc := range f.Include {
		paths = append(paths, inc.Path)
	}
	return paths
}

// dispenserVariables lists every DISPENSER_ variable the dispenser reads
// (the list -h and docs/configuration.md are made from).
func dispenserVariables(t *testing.T) []string {
	var names []string
	for _, v := range dispenser.Variables() {
		names = append(names, v.Name)
	}
	if len(names) == 0 {
		t.Fatal("the dispenser lists no variables")
	}
	return names
}

// env is the value of the variable k in the service's environment.
func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

func TestComposeFilesReferenceWhatExists(t *testing.T) {
	t.Chdir(composeDir)
	known := dispenserVariables(t)
	if len(known) < 20 {
		t.Fatalf("only %d dispenser variables found", len(known))
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	templates := load(t, "templates.yml")
	for _, name := range []string{"docker-compose.yml", "docker-compose.kv.yml"} {
		t.Run(name, func(t *testing.T) {
			project := load(t, name)
			mine := load(t, name, own)
			incs := includes(t, name)
			if len(incs) == 0 {
				t.Errorf("%s includes nothing", name)
			}
			for _, inc := range incs {
				mustExist(t, inc)
				for svc := range load(t, inc).Services {
					if _, dup := mine.Services[svc]; dup {
						t.Errorf("service %s defined in %s and included from %s", svc, name, inc)
					}
					if _, ok := project.Services[svc]; !ok {
						t.Errorf("service %s of %s is not in the loaded %s", svc, inc, name)
					}
				}
			}
			for svc, s := range mine.Services {
				if s.Extends == nil {
					continue
				}
				file := s.Extends.File
				if !filepath.IsAbs(file) {
					file = filepath.Join(dir, file)
				}
				mustExist(t, file)
				if _, ok := templates.Services[s.Extends.Service]; file != filepath.Join(dir, "templates.yml") || !ok {
					t.Errorf("%s extends %s in %s, which does not exist", svc, s.Extends.Service, s.Extends.File)
				}
			}
			dispensers := 0
			for svc, s := range project.Services {
				if strings.HasPrefix(svc, "dispenser-") {
					dispensers++
					if env(s, "DISPENSER_NATS_URL") == "" {
						t.Errorf("%s has no DISPENSER_NATS_URL", svc)
					}
				}
				checkService(t, svc, s, known, project.Services)
			}
			if dispensers != 3 {
				t.Errorf("%d dispensers, want 3", dispensers)
			}
		})
	}
}

func checkService(t *testing.T, name string, s types.ServiceConfig, known []string, services types.Services) {
	t.Helper()
	if s.Image == "" && s.Build == nil {
		t.Errorf("%s has neither image nor build", name)
	}
	if b := s.Build; b != nil {
		mustExist(t, b.Context)
		dockerfile := b.Dockerfile
		if !filepath.IsAbs(dockerfile) {
			dockerfile = filepath.Join(b.Context, dockerfile)
		}
		mustExist(t, dockerfile)
		content, _ := os.ReadFile(dockerfile)
		if !regexp.MustCompile(`(?m)^FROM .* AS ` + regexp.QuoteMeta(b.Target) + `$`).Match(content) {
			t.Errorf("%s builds target %q, which %s lacks", name, b.Target, dockerfile)
		}
	}
	for k := range s.Environment {
		v := env(s, k)
		if strings.HasPrefix(k, "DISPENSER_") && !slices.Contains(known, k) {
			t.Errorf("%s sets %s, which the dispenser does not read", name, k)
		}
		for _, host := range regexp.MustCompile(`(?:nats://|tcp\(|http://)([a-z0-9-]+):`).FindAllStringSubmatch(v, -1) {
			if _, ok := services[host[1]]; !ok {
				t.Errorf("%s: %s=%s names host %s, which is no service", name, k, v, host[1])
			}
		}
	}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind {
			mustExist(t, v.Source)
		}
	}
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("referenced path %s: %v", path, err)
	}
}

func TestCollectorScrapesTheDispensers(t *testing.T) {
	t.Chdir(composeDir)
	var cfg struct {
		Receivers struct {
			Prometheus struct {
				Config struct {
					ScrapeConfigs []struct {
						StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
					} `yaml:"scrape_configs"`
				}
			}
		}
	}
	b, err := os.ReadFile("otel-collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	main := load(t, "docker-compose.yml")
	metricsAddr := env(load(t, "templates.yml").Services["dispenser"], "DISPENSER_METRICS_ADDR")
	var targets []string
	for _, sc := range cfg.Receivers.Prometheus.Config.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if len(targets) != 3 {
		t.Fatalf("scrape targets %v", targets)
	}
	for _, target := range targets {
		host, port, _ := strings.Cut(target, ":")
		if s, ok := main.Services[host]; !ok {
			t.Errorf("scrape target %s is no service", target)
		} else if got := env(s, "DISPENSER_METRICS_ADDR"); got != metricsAddr {
			t.Errorf("scrape target %s: the service listens on %q, the template on %q", target, got, metricsAddr)
		}
		if ":"+port != metricsAddr {
			t.Errorf("scrape target %s, dispensers listen on %s", target, metricsAddr)
		}
	}
}

func TestNATSRoutesNameTheClusterNodes(t *testing.T) {
	t.Chdir(composeDir)
	conf, err := os.ReadFile("nats/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	cluster := load(t, "cluster.yml")
	routes := regexp.MustCompile(`nats-route://([a-z0-9-]+):6222`).FindAllStringSubmatch(string(conf), -1)
	if len(routes) != 3 {
		t.Fatalf("%d routes", len(routes))
	}
	for _, r := range routes {
		s, ok := cluster.Services[r[1]]
		if !ok {
			t.Errorf("route to %s, which is no service", r[1])
		} else if env(s, "NATS_NAME") != r[1] {
			t.Errorf("%s runs with NATS_NAME %q", r[1], env(s, "NATS_NAME"))
		}
	}
}

// mounts maps each bind mount's target in the service's container to its
// source on the host.
func mounts(s types.ServiceConfig) map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind {
			m[v.Target] = v.Source
		}
	}
	return m
}

// decodeYAML decodes the YAML file name strictly into v.
func decodeYAML(t *testing.T, name string, v any) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// prometheusConfig is the part of prometheus.yml the deployment relies on.
type prometheusConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string              `yaml:"job_name"`
		MetricsPath   string              `yaml:"metrics_path"`
		Params        map[string][]string `yaml:"params"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			Regex        string   `yaml:"regex"`
			TargetLabel  string   `yaml:"target_label"`
			Replacement  string   `yaml:"replacement"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

// TestPrometheusScrapesEveryDispenserAndLoadsTheRules: in both
// deployments Prometheus mounts its configuration and the alert rules
// where the configuration reads them, scrapes the /metrics of exactly the
// dispenser services on their metrics port, labelled with their subject
// prefix, and probes each one's /readyz through the blackbox exporter
// with a module the exporter has, every 15s (what alerts_test.yml
// assumes).
func TestPrometheusScrapesEveryDispenserAndLoadsTheRules(t *testing.T) {
	t.Chdir(composeDir)
	var prefixDefault string
	for _, v := range dispenser.Variables() {
		if v.Name == "DISPENSER_SUBJECT_PREFIX" {
			prefixDefault = v.Default
		}
	}
	var blackbox struct {
		Modules map[string]struct {
			Prober  string `yaml:"prober"`
			Timeout string `yaml:"timeout"`
			HTTP    struct {
				ValidStatusCodes []int `yaml:"valid_status_codes"`
				Method           string
			} `yaml:"http"`
		} `yaml:"modules"`
	}
	decodeYAML(t, "prometheus/blackbox.yml", &blackbox)
	for _, name := range []string{"docker-compose.yml", "docker-compose.kv.yml"} {
		t.Run(name, func(t *testing.T) {
			project := load(t, name)
			prom, ok := project.Services["prometheus"]
			if !ok {
				t.Fatal("no prometheus service")
			}
			m := mounts(prom)
			configFile := m["/etc/prometheus/prometheus.yml"]
			if !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") || configFile == "" {
				t.Fatalf("prometheus runs %v with mounts %v, not the configuration of compose/prometheus", prom.Command, m)
			}
			var cfg prometheusConfig
			decodeYAML(t, configFile, &cfg)
			if cfg.Global.ScrapeInterval != "15s" || cfg.Global.EvaluationInterval != "15s" {
				t.Errorf("scrape and evaluation every %s and %s, want 15s as alerts_test.yml assumes", cfg.Global.ScrapeInterval, cfg.Global.EvaluationInterval)
			}
			if len(cfg.RuleFiles) != 1 || filepath.Base(m[cfg.RuleFiles[0]]) != "alerts.yml" {
				t.Errorf("rule_files %v, mounts %v: alerts.yml is not loaded", cfg.RuleFiles, m)
			}
			metricsAddr := env(load(t, "templates.yml").Services["dispenser"], "DISPENSER_METRICS_ADDR")
			var want, wantReady []string
			prefixes := map[string]bool{}
			for svc, s := range project.Services {
				if strings.HasPrefix(svc, "dispenser-") {
					want = append(want, svc+env(s, "DISPENSER_METRICS_ADDR"))
					wantReady = append(wantReady, "http://"+svc+metricsAddr+"/readyz")
					prefixes[cmp.Or(env(s, "DISPENSER_SUBJECT_PREFIX"), prefixDefault)] = true
				}
			}
			jobs := map[string]bool{}
			for _, sc := range cfg.ScrapeConfigs {
				jobs[sc.JobName] = true
				var targets []string
				for _, st := range sc.StaticConfigs {
					targets = append(targets, st.Targets...)
					if p := st.Labels["subject_prefix"]; !prefixes[p] || len(prefixes) != 1 {
						t.Errorf("job %s labels its targets subject_prefix=%q, the dispensers serve %v", sc.JobName, p, prefixes)
					}
				}
				switch sc.JobName {
				case "uid-dispenser":
					if !sameSet(targets, want) {
						t.Errorf("job uid-dispenser scrapes %v, want every dispenser's metrics address %v", targets, want)
					}
				case "uid-dispenser-readyz":
					if !sameSet(targets, wantReady) {
						t.Errorf("job uid-dispenser-readyz probes %v, want %v", targets, wantReady)
					}
					if sc.MetricsPath != "/probe" || len(sc.Params["module"]) != 1 || blackbox.Modules[sc.Params["module"][0]].Prober != "http" {
						t.Errorf("readyz probe: path %s, module %v; blackbox.yml has %v", sc.MetricsPath, sc.Params["module"], blackbox.Modules)
					}
					exporter := ""
					for _, r := range sc.RelabelConfigs {
						if r.TargetLabel == "__address__" {
							exporter = r.Replacement
						}
					}
					host, port, _ := strings.Cut(exporter, ":")
					if bb, ok := project.Services[host]; !ok || port != "9115" || mounts(bb)["/etc/blackbox/blackbox.yml"] == "" {
						t.Errorf("readyz probes go to %q, which is no blackbox exporter service with blackbox.yml", exporter)
					}
				}
			}
			if !jobs["uid-dispenser"] || !jobs["uid-dispenser-readyz"] {
				t.Errorf("jobs %v, want uid-dispenser and uid-dispenser-readyz (the alert rules read both)", jobs)
			}
		})
	}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestGrafanaIsProvisioned: Grafana mounts a Prometheus data source that
// names the prometheus service's port, and a dashboard provider whose
// path holds the committed dashboard.
func TestGrafanaIsProvisioned(t *testing.T) {
	t.Chdir(composeDir)
	for _, name := range []string{"docker-compose.yml", "docker-compose.kv.yml"} {
		t.Run(name, func(t *testing.T) {
			project := load(t, name)
			g, ok := project.Services["grafana"]
			if !ok {
				t.Fatal("no grafana service")
			}
			m := mounts(g)
			var ds struct {
				APIVersion  int `yaml:"apiVersion"`
				Datasources []struct {
					Name      string         `yaml:"name"`
					UID       string         `yaml:"uid"`
					Type      string         `yaml:"type"`
					Access    string         `yaml:"access"`
					URL       string         `yaml:"url"`
					IsDefault bool           `yaml:"isDefault"`
					JSONData  map[string]any `yaml:"jsonData"`
				} `yaml:"datasources"`
			}
			decodeYAML(t, filepath.Join(m["/etc/grafana/provisioning/datasources"], "prometheus.yml"), &ds)
			if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || !ds.Datasources[0].IsDefault {
				t.Fatalf("data sources %+v, want one default Prometheus", ds.Datasources)
			}
			host, port, _ := strings.Cut(strings.TrimPrefix(ds.Datasources[0].URL, "http://"), ":")
			if p, ok := project.Services[host]; !ok || !slices.ContainsFunc(p.Command, func(a string) bool { return strings.HasPrefix(a, "--config.file=") }) || port != "9090" {
				t.Errorf("the data source's URL %s names no Prometheus service on 9090", ds.Datasources[0].URL)
			}
			var dash struct {
				APIVersion int `yaml:"apiVersion"`
				Providers  []struct {
					Name            string            `yaml:"name"`
					Type            string            `yaml:"type"`
					DisableDeletion bool              `yaml:"disableDeletion"`
					AllowUIUpdates  bool              `yaml:"allowUiUpdates"`
					Options         map[string]string `yaml:"options"`
				} `yaml:"providers"`
			}
			decodeYAML(t, filepath.Join(m["/etc/grafana/provisioning/dashboards"], "uid-dispenser.yml"), &dash)
			if len(dash.Providers) != 1 || dash.Providers[0].Type != "file" {
				t.Fatalf("dashboard providers %+v, want one of type file", dash.Providers)
			}
			file := m[dash.Providers[0].Options["path"]+"/uid-dispenser.json"]
			if file == "" {
				t.Fatalf("nothing mounted at %s/uid-dispenser.json (mounts %v)", dash.Providers[0].Options["path"], m)
			}
			dir, _ := os.Getwd()
			if file != filepath.Join(dir, "grafana", "uid-dispenser.json") {
				t.Errorf("the dashboard mounted is %s, not compose/grafana/uid-dispenser.json", file)
			}
			b, err := os.ReadFile(file)
			var d struct {
				UID    string `json:"uid"`
				Panels []any  `json:"panels"`
			}
			if err == nil {
				err = json.Unmarshal(b, &d)
			}
			if err != nil || d.UID == "" || len(d.Panels) == 0 {
				t.Errorf("%s: uid %q, %d panels, %v", file, d.UID, len(d.Panels), err)
			}
		})
	}
}
