package composecheck

import (
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
