package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekeeper/leasekeeper/metrics"
)

// tracerName names the spans this package makes (the instrumentation scope).
const tracerName = "github.com/leasekeeper/leasekeeper/handlers"

// traced starts a server span for each request, continuing the W3C trace context
// (traceparent) the client sent, and ends it with the route pattern, the status and the
// caller's key id. Never the raw path, a query, a header or a body: they may carry names
// outside a key's scope, lease ids or keys. It is installed only when tracing is on.
func (s *server) traced(next http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", metrics.MethodLabel(r.Method))))
		defer span.End()
		info, r := ensureInfo(r.WithContext(ctx))
		next.ServeHTTP(w, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := info.resp.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status),
			attribute.String("leasekeeper.request_id", info.id))
		if id := info.principal.p.KeyID; id != "" {
			span.SetAttributes(attribute.String("leasekeeper.key_id", id))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// waitSpan starts the span of an acquire's wait in line, when tracing is on; end it with the
// outcome. Off, it costs a nil check.
func (s *server) waitSpan(ctx context.Context, wait time.Duration) func(err error) {
	if s.tracer == nil {
		return func(error) {}
	}
	_, span := s.tracer.Start(ctx, "lease.wait", trace.WithAttributes(attribute.Int64("lease.wait_ms", wait.Milliseconds())))
	return func(err error) {
		span.SetAttributes(attribute.String("lease.outcome", metrics.Outcome(err)))
		span.End()
	}
}
