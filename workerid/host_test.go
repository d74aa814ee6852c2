package workerid

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDetectHost(t *testing.T) {
	now := time.UnixMilli(1796039990123)
	stamp := regexp.MustCompile(`^1796039990123-\d{1,5}$`)
	long := strings.Repeat("h", 70)
	cases := []struct {
		name     string
		env      map[string]string
		wantName string
		wantPort string // or "stamp"
		wantType HostType
		wantErr  bool
	}{
		{"actual", nil, "192.0.2.7", "stamp", HostActual, false},
		{"container", map[string]string{"JPAAS_HOST": "10.1.2.3", "JPAAS_HTTP_PORT": "8080"}, "10.1.2.3", "8080", HostContainer, false},
		{"container original port", map[string]string{"JPAAS_HOST": "10.1.2.3", "JPAAS_HOST_PORT_8080": "31080"}, "10.1.2.3", "31080", HostContainer, false},
		{"host without port", map[string]string{"JPAAS_HOST": "10.1.2.3"}, "", "", 0, true},
		{"port without host", map[string]string{"JPAAS_HTTP_PORT": "8080"}, "", "", 0, true},
		{"kubernetes pod", map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "POD_NAME": "dispenser-7d9f-x2", "POD_IP": "10.244.1.9"}, "dispenser-7d9f-x2", "10.244.1.9", HostContainer, false},
		{"kubernetes hostname", map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "HOSTNAME": "dispenser-0"}, "dispenser-0", "stamp", HostContainer, false},
		{"long name clipped", map[string]string{"JPAAS_HOST": long, "JPAAS_HTTP_PORT": "1"}, long[:64], "1", HostContainer, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := detectHost(func(k string) string { return tc.env[k] }, now, func() string { return "192.0.2.7" })
			if tc.wantErr {
				if !errors.Is(err, ErrHostEnv) {
					t.Fatalf("err = %v, want ErrHostEnv", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != tc.wantName || h.Type != tc.wantType {
				t.Errorf("got %+v, want name %q type %d", h, tc.wantName, tc.wantType)
			}
			if tc.wantPort == "stamp" && !stamp.MatchString(h.Port) || tc.wantPort != "stamp" && h.Port != tc.wantPort {
				t.Errorf("port %q, want %s", h.Port, tc.wantPort)
			}
		})
	}
}

func TestDetectHostOnThisMachine(t *testing.T) {
	h, err := DetectHost(os.Getenv)
	if err != nil {
		t.Skipf("container environment incomplete here: %v", err)
	}
	if h.Name == "" || h.Port == "" || len(h.Name) > 64 || len(h.Port) > 64 {
		t.Errorf("host %+v", h)
	}
}

// FuzzClip: clipping keeps a prefix of at most 64 bytes and valid UTF-8.
func FuzzClip(f *testing.F) {
	f.Add("10.0.0.1")
	f.Add(strings.Repeat("é", 40))
	f.Add(strings.Repeat("a", 63) + "日本")
	f.Fuzz(func(t *testing.T, s string) {
		c := clip(s)
		if len(c) > maxHostField || !strings.HasPrefix(s, c) {
			t.Fatalf("clip(%q) = %q", s, c)
		}
		if utf8.ValidString(s) && !utf8.ValidString(c) {
			t.Fatalf("clip(%q) = %q breaks UTF-8", s, c)
		}
		if len(s) <= maxHostField && c != s {
			t.Fatalf("clip changed a short string %q to %q", s, c)
		}
	})
}
