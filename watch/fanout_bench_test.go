package watch_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/watch"
)

// quietStore is a store with no history: every event a benchmark's streams see comes from the
// hub's memory.
type quietStore struct{}

func (quietStore) Events(context.Context, store.EventFilter) (store.Page[lease.Event], error) {
	return store.Page[lease.Event]{}, nil
}
func (quietStore) LatestSeq(context.Context) (int64, error) { return 0, nil }

// lastIDWriter is a stream's client that keeps only the id of the last event written to it.
type lastIDWriter struct {
	h    http.Header
	last atomic.Int64
}

func (w *lastIDWriter) Header() http.Header { return w.h }
func (w *lastIDWriter) WriteHeader(int)     {}
func (w *lastIDWriter) Flush()              {}
func (w *lastIDWriter) Write(p []byte) (int, error) {
	if i := bytes.LastIndex(p, []byte("id: ")); i >= 0 && (i == 0 || p[i-1] == '\n') {
		end := bytes.IndexByte(p[i:], '\n')
		if n, err := strconv.ParseInt(string(p[i+4:i+end]), 10, 64); err == nil {
			w.last.Store(n)
		}
	}
	return len(p), nil
}

// BenchmarkFanOut measures what the hub spends to deliver a commit of 4 events to 200 streams
// that watch every event, with coalescing off: per op, 800 deliveries. Its allocations per op
// are the watchers' garbage, which with many watchers dominated the server's CPU (the
// collector scanning copies of events).
func BenchmarkFanOut(b *testing.B) {
	const streams, batch = 200, 4
	hub := watch.NewHub(quietStore{}, watch.Options{MaxWatchers: streams, Coalesce: time.Nanosecond, WriteBudget: 1 << 30,
		Encode: func(e lease.Event) any {
			return map[string]any{"seq": e.Seq, "type": e.Type, "name": e.Name, "token": e.Token}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ws := make([]*lastIDWriter, streams)
	for i := range ws {
		s, err := hub.Open(ctx, "", "")
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = &lastIDWriter{h: http.Header{}}
		wg.Go(func() { s.Serve(ws[i], nil) })
	}
	defer func() { cancel(); wg.Wait() }()
	at := time.Unix(1_800_000_000, 0)
	seq := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		evs := make([]lease.Event, batch)
		for i := range evs {
			seq++
			evs[i] = lease.Event{Seq: seq, Type: lease.EventRenewed, Name: "jobs/nightly-report", Token: 1_700_000_000_000_000 + seq,
				Holder: "worker-7 (pid 4242)", At: at, ExpiresAt: at.Add(30 * time.Second)}
		}
		hub.ObserveEvents(evs)
		for _, w := range ws {
			for w.last.Load() < seq {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streams*batch), "ns/delivery")
}
