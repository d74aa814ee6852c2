package compose

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/uid-dispenser/uid-dispenser/dispenser"
	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Include  []struct{ Path string } `yaml:"include"`
	Services map[string]service      `yaml:"services"`
	Volumes  map[string]any          `yaml:"volumes"`
}

type service struct {
	Image   string `yaml:"image"`
	Extends *struct {
		File    string `yaml:"file"`
		Service string `yaml:"service"`
	} `yaml:"extends"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Target     string `yaml:"target"`
	} `yaml:"build"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   any               `yaml:"depends_on"`
	Command     []string          `yaml:"command"`
}

func load(t *testing.T, name string) composeFile {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// dispenserVariables lists every DISPENSER_ variable the dispenser reads.
func dispenserVariables(t *testing.T) []string {
	var buf bytes.Buffer
	if err := dispenser.Usage(&buf); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`DISPENSER_[A-Z0-9_]+`).FindAllString(buf.String(), -1)
}

var interpolation = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:?-[^}]*)?\}`)

func TestComposeFilesReferenceWhatExists(t *testing.T) {
	known := dispenserVariables(t)
	if len(known) < 20 {
		t.Fatalf("only %d dispenser variables found", len(known))
	}
	templates := load(t, "templates.yml")
	for _, name := range []string{"docker-compose.yml", "docker-compose.kv.yml"} {
		t.Run(name, func(t *testing.T) {
			f := load(t, name)
			services := map[string]service{}
			for name, s := range f.Services {
				services[name] = s
			}
			for _, inc := range f.Include {
				mustExist(t, inc.Path)
				for name, s := range load(t, inc.Path).Services {
					if _, dup := services[name]; dup {
						t.Errorf("service %s defined in %s and included from %s", name, name, inc.Path)
					}
					services[name] = s
				}
			}
			dispensers := 0
			for name, s := range services {
				if s.Extends != nil {
					mustExist(t, s.Extends.File)
					base, ok := templates.Services[s.Extends.Service]
					if s.Extends.File != "templates.yml" || !ok {
						t.Errorf("%s extends %s in %s, which does not exist", name, s.Extends.Service, s.Extends.File)
					}
					s = merge(base, s)
				}
				if strings.HasPrefix(name, "dispenser-") {
					dispensers++
					if s.Environment["DISPENSER_NATS_URL"] == "" {
						t.Errorf("%s has no DISPENSER_NATS_URL", name)
					}
				}
				checkService(t, name, s, known, services)
			}
			if dispensers != 3 {
				t.Errorf("%d dispensers, want 3", dispensers)
			}
		})
	}
}

func merge(base, s service) service {
	env := map[string]string{}
	for k, v := range base.Environment {
		env[k] = v
	}
	for k, v := range s.Environment {
		env[k] = v
	}
	base.Environment = env
	base.Volumes = append(base.Volumes, s.Volumes...)
	if s.Command != nil {
		base.Command = s.Command
	}
	return base
}

func checkService(t *testing.T, name string, s service, known []string, services map[string]service) {
	t.Helper()
	if s.Image == "" && s.Build == nil {
		t.Errorf("%s has neither image nor build", name)
	}
	if b := s.Build; b != nil {
		mustExist(t, b.Context)
		dockerfile := filepath.Join(b.Context, b.Dockerfile)
		mustExist(t, dockerfile)
		content, _ := os.ReadFile(dockerfile)
		if !regexp.MustCompile(`(?m)^FROM .* AS ` + regexp.QuoteMeta(b.Target) + `$`).Match(content) {
			t.Errorf("%s builds target %q, which %s lacks", name, b.Target, dockerfile)
		}
	}
	for k, v := range s.Environment {
		if strings.HasPrefix(k, "DISPENSER_") && !slices.Contains(known, k) {
			t.Errorf("%s sets %s, which the dispenser does not read", name, k)
		}
		for _, m := range interpolation.FindAllStringSubmatch(v, -1) {
			if m[2] == "" {
				t.Errorf("%s: ${%s} has no default, so the file needs a variable nobody sets", name, m[1])
			}
		}
		for _, host := range regexp.MustCompile(`(?:nats://|tcp\(|http://)([a-z0-9-]+):`).FindAllStringSubmatch(v, -1) {
			if _, ok := services[host[1]]; !ok {
				t.Errorf("%s: %s=%s names host %s, which is no service", name, k, v, host[1])
			}
		}
	}
	for _, v := range s.Volumes {
		if src, _, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, ".") {
			mustExist(t, src)
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
	metricsAddr := load(t, "templates.yml").Services["dispenser"].Environment["DISPENSER_METRICS_ADDR"]
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
		if _, ok := main.Services[host]; !ok {
			t.Errorf("scrape target %s is no service", target)
		}
		if ":"+port != metricsAddr {
			t.Errorf("scrape target %s, dispensers listen on %s", target, metricsAddr)
		}
	}
}

func TestNATSRoutesNameTheClusterNodes(t *testing.T) {
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
		} else if s.Environment["NATS_NAME"] != r[1] {
			t.Errorf("%s runs with NATS_NAME %q", r[1], s.Environment["NATS_NAME"])
		}
	}
}
