package telemetry

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/uid-dispenser/uid-dispenser/internal/setting"
)

// errNoReadyCheck is what /readyz reports without a readiness check.
var errNoReadyCheck = errors.New("no readiness check configured")

// startServer listens on addr at once, so that a bad or busy address fails
// Setup, and serves in the background until Shutdown.
func (t *Telemetry) startServer(addr string, registry *prometheus.Registry) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &setting.Error{Field: "MetricsAddr", Reason: strconv.Quote(addr), Err: err}
	}
	t.listener = ln
	t.server = &http.Server{
		Handler:           t.handler(registry),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	t.serveDone = make(chan struct{})
	go func() {
		defer close(t.serveDone)
		if err := t.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.logger.Error("telemetry: metrics server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// handler serves /metrics, /healthz (the process answers: liveness) and
// /readyz (Config.Ready says the instance holds its claim and serves).
func (t *Telemetry) handler(registry *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: t.labelled(registry)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writePlain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		err := errNoReadyCheck
		if check := t.ready.Load(); check != nil && *check != nil {
			err = (*check)()
		}
		if err != nil {
			writePlain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		writePlain(w, http.StatusOK, "ready")
	})
	return mux
}

func writePlain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
