package watch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

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

// BenchmarkFanOut measures what the hub spends to deliver commits of 4 events, with
// coalescing off: to 200 streams that watch every event (800 deliveries an op), and to the one
// of 1,000 streams, each watching its own lease, whose lease the commit is about (4 deliveries
// an op: the other 999 have nothing to read and should cost nothing). Allocations per op are
// the watchers' garbage, which with many watchers dominated the server's CPU.
func BenchmarkFanOut(b *testing.B) {
	b.Run("EveryEvent200", func(b *testing.B) { benchFanOut(b, 200, func(int) string { return "" }) })
	b.Run("OwnLease1000", func(b *testing.B) {
		benchFanOut(b, 1000, func(i int) string { return fmt.Sprintf("jobs/%05d", i) })
	})
}

// benchFanOut serves streams watchers, watcher i of prefix(i), and commits events of the name
// prefix(0)+"": every watcher of a prefix of it must receive them before the next commit.
func benchFanOut(b *testing.B, streams int, prefix func(int) string) {
	const batch = 4
	hub := NewHub(emptyStore{}, Options{MaxWatchers: streams, Coalesce: time.Nanosecond, WriteBudget: 1 << 30,
		Encode: func(e lease.Event) any {
			return map[string]any{"seq": e.Seq, "type": e.Type, "name": e.Name, "token": e.Token}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var receivers []*lastIDWriter // the streams the commits are for
	name := prefix(0)
	for i := range streams {
		s, err := hub.Open(ctx, prefix(i), "")
		if err != nil {
			b.Fatal(err)
		}
		w := &lastIDWriter{h: http.Header{}}
		if strings.HasPrefix(name, prefix(i)) {
			receivers = append(receivers, w)
		}
		wg.Go(func() { s.Serve(w, nil) })
	}
	defer func() { cancel(); wg.Wait() }()
	for hub.Watchers() < streams {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let every stream reach its wait
	at := time.Unix(1_800_000_000, 0)
	seq := int64(0)
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		evs := make([]lease.Event, batch)
		for i := range evs {
			seq++
			evs[i] = lease.Event{Seq: seq, Type: lease.EventRenewed, Name: name, Token: 1_700_000_000_000_000 + seq,
				Holder: "worker-7 (pid 4242)", At: at, ExpiresAt: at.Add(30 * time.Second)}
		}
		hub.ObserveEvents(evs)
		for _, w := range receivers {
			for w.last.Load() < seq {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(receivers)*batch), "ns/delivery")
}
