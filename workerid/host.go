package workerid

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"time"
)

// HostType is UidGenerator's WORKER_NODE.TYPE.
type HostType int

const (
	// HostContainer (1) is an instance whose host and port come from its
	// container environment.
	HostContainer HostType = 1
	// HostActual (2) is an instance on a plain host: its address and a
	// start-up stamp in place of the port.
	HostActual HostType = 2
)

// maxHostField is the width of WORKER_NODE's HOST_NAME and PORT columns.
const maxHostField = 64

// Host identifies an instance in the worker-ID store, for operators: which
// instance holds (or held) a worker ID. It plays no part in uniqueness.
type Host struct {
	Name string
	Port string
	Type HostType
}

// ErrHostEnv means the container environment names a host without a port
// or a port without a host.
var ErrHostEnv = errors.New("workerid: incomplete container host environment")

// DetectHost works out the instance's identity the way UidGenerator does,
// with Kubernetes added:
//
//   - UidGenerator's container variables: JPAAS_HOST with JPAAS_HTTP_PORT
//     (or JPAAS_HOST_PORT_8080) give a container host; one without the
//     other is an error.
//   - Kubernetes (KUBERNETES_SERVICE_HOST or POD_NAME set): the pod name
//     (POD_NAME, else HOSTNAME, else the host name) with the pod IP
//     (POD_IP) as the port when the downward API provides it.
//   - Otherwise an actual host: the first non-loopback IP address (the
//     host name when there is none) and, as the port, the start time in
//     milliseconds, a dash and a random number below 100000.
//
// getenv reads the environment (the dispenser passes os.Getenv: it is the
// program that owns the environment); nil reads none, which makes an
// actual host.
func DetectHost(getenv func(string) string) (Host, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return detectHost(getenv, time.Now(), localAddress)
}

func detectHost(getenv func(string) string, now time.Time, addr func() string) (Host, error) {
	host := getenv("JPAAS_HOST")
	port := getenv("JPAAS_HTTP_PORT")
	if port == "" {
		port = getenv("JPAAS_HOST_PORT_8080")
	}
	switch {
	case host != "" && port != "":
		return Host{Name: clip(host), Port: clip(port), Type: HostContainer}, nil
	case host != "" || port != "":
		return Host{}, fmt.Errorf("%w: JPAAS_HOST is %q, JPAAS_HTTP_PORT or JPAAS_HOST_PORT_8080 is %q: set both or neither", ErrHostEnv, host, port)
	}
	stamp := strconv.FormatInt(now.UnixMilli(), 10) + "-" + strconv.Itoa(rand.IntN(100000))
	if getenv("KUBERNETES_SERVICE_HOST") != "" || getenv("POD_NAME") != "" {
		name := getenv("POD_NAME")
		if name == "" {
			name = getenv("HOSTNAME")
		}
		if name == "" {
			name, _ = os.Hostname()
		}
		port := getenv("POD_IP")
		if port == "" {
			port = stamp
		}
		return Host{Name: clip(name), Port: clip(port), Type: HostContainer}, nil
	}
	return Host{Name: clip(addr()), Port: stamp, Type: HostActual}, nil
}

// localAddress is the first non-loopback IP address of an interface that
// is up, IPv4 preferred; the host name when there is none.
func localAddress() string {
	var v6 string
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
				continue
			}
			if ip4 := ipnet.IP.To4(); ip4 != nil {
				return ip4.String()
			}
			if v6 == "" {
				v6 = ipnet.IP.String()
			}
		}
	}
	if v6 != "" {
		return v6
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		return name
	}
	return "unknown"
}

// clip cuts s to the width of the store's columns, on a byte boundary that
// keeps UTF-8 valid.
func clip(s string) string {
	if len(s) <= maxHostField {
		return s
	}
	cut := maxHostField
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
