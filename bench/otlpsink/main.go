// Command otlpsink is an OTLP/HTTP trace receiver for benchmarks: it
// accepts POST /v1/traces (protobuf, gzip or not), counts the posts, the
// bytes and the spans by name, and discards them. GET /stats reports the
// counts, one per line:
//
//	posts 859
//	bytes 112000000
//	spans 440000
//	span process uid.next 439990
//
// It runs as a process of its own, as a collector does, so that what it
// costs is not counted in the traced process; it decodes no more of a
// request than the span names, with the standard library alone.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "listen address")
	addrFile := flag.String("addr-file", "", "write the address listened on to this file (for -addr with port 0)")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(l.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	s := &sink{names: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.traces)
	mux.HandleFunc("GET /stats", s.stats)
	log.Fatal(http.Serve(l, mux))
}

// sink is the receiver's counts.
type sink struct {
	mu    sync.Mutex
	posts int64
	bytes int64 // decompressed
	bad   int64 // posts whose body did not parse
	names map[string]int64
}

// bufs are the request bodies' buffers, reused: a post is about 140 KiB.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *sink) traces(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	buf := bufs.Get().(*bytes.Buffer)
	defer bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// Under the lock: the exporter posts one batch at a time.
	s.mu.Lock()
	s.posts++
	s.bytes += int64(buf.Len())
	perr := countSpans(buf.Bytes(), s.names)
	if perr != nil {
		s.bad++
	}
	s.mu.Unlock()
	if perr != nil {
		http.Error(w, perr.Error(), http.StatusBadRequest)
		return
	}
	// An empty ExportTraceServiceResponse: every span accepted.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (s *sink) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var spans int64
	names := make([]string, 0, len(s.names))
	for name, n := range s.names {
		names = append(names, name)
		spans += n
	}
	fmt.Fprintf(w, "posts %d\nbytes %d\nspans %d\nbad %d\n", s.posts, s.bytes, spans, s.bad)
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "span %s %d\n", name, s.names[name])
	}
}
