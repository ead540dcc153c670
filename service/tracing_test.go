package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestTracing drives a server that traces, through the Go client inside a span of the
// caller's: the server's span continues the caller's trace (traceparent), names the route,
// the status and the key id and no secret; the store's batch and the wait in line are spans of
// the same trace.
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	srv, _ := servicetest.Start(t, service.Config{Tracer: tp}, sqlite.Options{})
	key := servicetest.KeyOf(srv.URL)
	c, err := client.New(srv.URL, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "w", TTL: time.Minute, DisableKeepAlive: true})
	if err != nil {
		t.Fatalf("Acquire() = %v", err)
	}
	caller.End()
	// The same name again, waiting a little: a wait in line that runs out.
	c.Acquire(ctx, "job", client.AcquireOptions{Holder: "w2", TTL: time.Minute, Wait: 50 * time.Millisecond, DisableKeepAlive: true})

	want := caller.SpanContext().TraceID()
	var server, batch, wait []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, key) || strings.Contains(v, l.ID()) {
				t.Errorf("span %s attribute %s = %q holds a secret", s.Name, kv.Key, v)
			}
		}
		if s.SpanContext.TraceID() != want {
			continue
		}
		switch {
		case s.Name == "POST /v1/leases/{name}/acquire" && s.SpanKind == trace.SpanKindServer:
			server = append(server, s)
		case s.Name == "store.batch":
			batch = append(batch, s)
		case s.Name == "lease.wait":
			wait = append(wait, s)
		}
	}
	if len(server) != 2 {
		t.Fatalf("server spans of the caller's trace named POST /v1/leases/{name}/acquire: %d, want 2 (spans: %v)", len(server), names(exp.GetSpans()))
	}
	s := server[0]
	if s.Parent.SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("the server span's parent = %v, want the caller's span %v", s.Parent.SpanID(), caller.SpanContext().SpanID())
	}
	for k, want := range map[string]string{"http.route": "/v1/leases/{name}/acquire", "http.response.status_code": "200", "http.request.method": "POST"} {
		if v, ok := attr(s, k); !ok || v.String() != want {
			t.Errorf("server span %s = %q, want %q", k, v.String(), want)
		}
	}
	if v, ok := attr(s, "leasekeeper.key_id"); !ok || v.String() == "" || v.String() == key {
		t.Errorf("server span leasekeeper.key_id = %q, want the key's public id", v.String())
	}
	if v, _ := attr(server[1], "http.response.status_code"); v.String() != "409" {
		t.Errorf("second acquire's span status = %q, want 409", v.String())
	}
	if len(batch) == 0 {
		t.Fatal("no store.batch span in the caller's trace")
	}
	if batch[0].Parent.SpanID() != s.SpanContext.SpanID() {
		t.Errorf("store.batch's parent = %v, want the request's span %v", batch[0].Parent.SpanID(), s.SpanContext.SpanID())
	}
	for _, k := range []string{"store.batch.size", "store.batch.commit_ms", "store.batch.took_ms", "store.batch.committed"} {
		if _, ok := attr(batch[0], k); !ok {
			t.Errorf("store.batch has no %s", k)
		}
	}
	if len(wait) != 1 {
		t.Fatalf("lease.wait spans: %d, want 1", len(wait))
	}
	if v, _ := attr(wait[0], "lease.outcome"); v.String() != "lease_held" {
		t.Errorf("lease.wait outcome = %q, want lease_held (the wait ran out)", v.String())
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestNoTracerNoSpans: without a tracer the server neither traces nor answers differently to
// a request that carries a traceparent.
func TestNoTracerNoSpans(t *testing.T) {
	srv, _ := servicetest.Start(t, service.Config{}, sqlite.Options{})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/leases", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := servicetest.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/leases with a traceparent = %v, %v", resp, err)
	}
	resp.Body.Close()
}

// BenchmarkTracing renews one lease through the whole handler (no sockets) with tracing off
// (no tracer: the server as it runs by default), on with every request sampled, and on with
// none sampled; the batch hook is set only when a tracer is, as serve does.
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "sampled", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			cfg := service.Config{Auth: handlers.AuthConfig{Off: true}}
			switch mode {
			case "sampled":
				cfg.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			case "unsampled":
				cfg.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
			}
			var hooks service.Hooks
			opts := sqlite.Options{OnCommit: hooks.Publish, OnBatch: hooks.Batch}
			if cfg.Tracer != nil {
				opts.OnBatchTrace = hooks.Trace
			}
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "lk.db"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			svc, err := service.New(st, &hooks, cfg)
			if err != nil {
				b.Fatal(err)
			}
			w := httptest.NewRecorder()
			svc.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/leases/job/acquire", strings.NewReader(`{"holder":"b","ttl_ms":3600000}`)))
			var l struct {
				LeaseID string `json:"lease_id"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || l.LeaseID == "" {
				b.Fatalf("acquire = %d %s", w.Code, w.Body)
			}
			body := `{"lease_id":"` + l.LeaseID + `"}`
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				req := httptest.NewRequest(http.MethodPost, "/v1/leases/job/renew", strings.NewReader(body))
				req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				w := httptest.NewRecorder()
				svc.Handler.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("renew = %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
