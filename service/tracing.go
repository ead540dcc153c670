package service

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekeeper/leasekeeper/store"
)

// Trace hands a batch of the store's writer to the tracer; give it to the store as its
// batch-trace hook (sqlite.Options.OnBatchTrace) when tracing is on. It never blocks.
func (h *Hooks) Trace(b store.Batch) {
	h.mu.RLock()
	f := h.trace
	h.mu.RUnlock()
	if f != nil {
		f(b)
	}
}

// batchSpans records a batch as a span in the trace of each of its operations that has one
// (a batch serves many requests, and each request's trace shows the commit it waited for):
// its size, its time from BEGIN to the end of COMMIT, and COMMIT's own (the fsync).
func batchSpans(tracer trace.Tracer) func(store.Batch) {
	return func(b store.Batch) {
		attrs := []attribute.KeyValue{attribute.Int("store.batch.size", len(b.Ops)),
			attribute.Float64("store.batch.commit_ms", float64(b.Commit.Microseconds())/1000),
			attribute.Float64("store.batch.took_ms", float64(b.Took.Microseconds())/1000),
			attribute.Bool("store.batch.committed", b.Committed)}
		for _, ctx := range b.Ops {
			if !trace.SpanContextFromContext(ctx).IsSampled() {
				continue
			}
			_, span := tracer.Start(ctx, "store.batch", trace.WithTimestamp(b.Began), trace.WithAttributes(attrs...))
			if !b.Committed {
				span.SetStatus(codes.Error, "the batch did not commit")
			}
			span.End(trace.WithTimestamp(b.Began.Add(b.Took)))
		}
	}
}
