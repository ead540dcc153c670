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

// lastIDWriter is a stream's client that keeps only the id of the last event written to it,
// and signals reached once that id is want or later.
type lastIDWriter struct {
	h       http.Header
	last    atomic.Int64
	want    atomic.Int64
	reached chan struct{}
}

func (w *lastIDWriter) Header() http.Header { return w.h }
func (w *lastIDWriter) WriteHeader(int)     {}
func (w *lastIDWriter) Flush()              {}
func (w *lastIDWriter) Write(p []byte) (int, error) {
	if i := bytes.LastIndex(p, []byte("id: ")); i >= 0 && (i == 0 || p[i-1] == '\n') {
		end := bytes.IndexByte(p[i:], '\n')
		if n, err := strconv.ParseInt(string(p[i+4:i+end]), 10, 64); err == nil {
			w.last.Store(n)
			if n >= w.want.Load() {
				select {
				case w.reached <- struct{}{}:
				default:
				}
			}
		}
	}
	return len(p), nil
}

// BenchmarkFanOut measures what the hub spends to deliver commits of 4 events, with
// coalescing off: to 200 streams that watch every event (800 deliveries an op), and to the one
// of 1,000 streams, each watching its own lease, whose lease the commit is about (4 deliveries
// an op: the other 999 have nothing to read and should cost nothing). Allocations per op are
// the watchers' garbage, which with many watchers dominated the server's CPU.
//
// OwnLeaseTurns1000 commits each op for the next of the 1,000 leases in turn, so a stream
// reads once every 1,000 commits: what a woken stream spends to find its own 4 events among
// the ~4,000 committed since it last read.
func BenchmarkFanOut(b *testing.B) {
	b.Run("EveryEvent200", func(b *testing.B) { benchFanOut(b, 200, func(int) string { return "" }, 1) })
	own := func(i int) string { return fmt.Sprintf("jobs/%05d", i) }
	b.Run("OwnLease1000", func(b *testing.B) { benchFanOut(b, 1000, own, 1) })
	b.Run("OwnLeaseTurns1000", func(b *testing.B) { benchFanOut(b, 1000, own, 1000) })
}

// benchFanOut serves streams watchers, watcher i of prefix(i), and commits events of the names
// prefix(0), …, prefix(turns-1) in turn: every watcher of a prefix of the name of a commit
// must receive it before the next commit.
func benchFanOut(b *testing.B, streams int, prefix func(int) string, turns int) {
	const batch = 4
	hub := NewHub(emptyStore{}, Options{MaxWatchers: streams, Coalesce: time.Nanosecond, WriteBudget: 1 << 30,
		Encode: func(e lease.Event) any {
			return map[string]any{"seq": e.Seq, "type": e.Type, "name": e.Name, "token": e.Token}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	receivers := make([][]*lastIDWriter, turns) // the streams the commits of each name are for
	for i := range streams {
		s, err := hub.Open(ctx, prefix(i), "")
		if err != nil {
			b.Fatal(err)
		}
		w := &lastIDWriter{h: http.Header{}, reached: make(chan struct{}, 1)}
		for t := range turns {
			if strings.HasPrefix(prefix(t), prefix(i)) {
				receivers[t] = append(receivers[t], w)
			}
		}
		wg.Go(func() { s.Serve(w, nil) })
	}
	defer func() { cancel(); wg.Wait() }()
	for hub.Watchers() < streams {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let every stream reach its wait
	at := time.Unix(1_800_000_000, 0)
	seq, op, deliveries := int64(0), 0, 0
	b.ReportAllocs()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		name := prefix(op % turns)
		evs := make([]lease.Event, batch)
		for i := range evs {
			seq++
			evs[i] = lease.Event{Seq: seq, Type: lease.EventRenewed, Name: name, Token: 1_700_000_000_000_000 + seq,
				Holder: "worker-7 (pid 4242)", At: at, ExpiresAt: at.Add(30 * time.Second)}
		}
		for _, w := range receivers[op%turns] {
			w.want.Store(seq)
		}
		hub.ObserveEvents(evs)
		for _, w := range receivers[op%turns] {
			for w.last.Load() < seq {
				<-w.reached
			}
		}
		deliveries += batch * len(receivers[op%turns])
		op++
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(deliveries), "ns/delivery")
}
