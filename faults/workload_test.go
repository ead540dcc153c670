package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leaseTTL is long enough that no acknowledged lease expires during a test: after a fault,
// every lease the model holds must still be held.
const leaseTTL = 60 * time.Second

// figures are what a fault run reports.
type figures struct {
	cycles, acked, checked, unknown, lost, regressions atomic.Int64
}

func (f *figures) String() string {
	return fmt.Sprintf("cycles=%d acknowledged=%d state_checks=%d unknown_outcomes=%d lost=%d regressions=%d",
		f.cycles.Load(), f.acked.Load(), f.checked.Load(), f.unknown.Load(), f.lost.Load(), f.regressions.Load())
}

// workload is n clients, each with its own lease name and fenced resource, and the model of
// what the server acknowledged to each.
type workload struct {
	t        testing.TB
	clients  []*worker
	fig      figures
	maxToken atomic.Int64 // the largest acknowledged token
	mu       sync.Mutex
	failures []string
	// only503, when set, makes every 5xx answer but 503 with Retry-After a failure: the
	// server's dependency (PostgreSQL) failed, the server did not.
	only503 bool
	// noPuts, while set, keeps the clients from fenced writes (see TestDatabaseCrash).
	noPuts atomic.Bool
}

type op struct {
	kind  string // acquire, renew, put, release
	value string // put
	token int64  // put
	floor int64  // the largest token acknowledged before it was sent
}

// worker is one client's acknowledged state: what the server must still have after a fault.
type worker struct {
	name, resource string
	held           bool
	leaseID        string
	token          int64     // the current grant's, or the last one's when free
	expires        time.Time // the latest acknowledged expiry of the current grant
	putValue       string    // the last acknowledged fenced write
	putFence       int64
	pending        *op // sent, no answer: its outcome is unknown
	seq            int
}

func newWorkload(t testing.TB, n int) *workload {
	w := &workload{t: t}
	for i := range n {
		w.clients = append(w.clients, &worker{name: fmt.Sprintf("fault-%02d", i), resource: fmt.Sprintf("fault-res-%02d", i)})
	}
	return w
}

func (w *workload) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if len(w.failures) < 20 {
		w.failures = append(w.failures, msg)
	}
}

// run drives every client against s until ctx ends or the server stops answering.
func (w *workload) run(ctx context.Context, s *server) {
	var wg sync.WaitGroup
	for _, c := range w.clients {
		wg.Go(func() { w.drive(ctx, s, c) })
	}
	wg.Wait()
}

// drive runs one client's loop: acquire, then renew, fenced PUT or release at random.
func (w *workload) drive(ctx context.Context, s *server, c *worker) {
	for ctx.Err() == nil {
		var o op
		switch r := rand.IntN(100); {
		case !c.held:
			o.kind = "acquire"
		case r < 35, r < 80 && w.noPuts.Load():
			o.kind = "renew"
		case r < 80:
			c.seq++
			o = op{kind: "put", value: fmt.Sprintf("%s/%d/%d", c.name, c.token, c.seq), token: c.token}
		default:
			o.kind = "release"
		}
		floor := w.maxToken.Load()
		o.floor = floor
		var rep reply
		switch o.kind {
		case "acquire":
			rep = s.call(ctx, "POST", "/v1/leases/"+c.name+"/acquire", map[string]any{"holder": c.name, "ttl_ms": leaseTTL.Milliseconds()})
		case "renew":
			rep = s.call(ctx, "POST", "/v1/leases/"+c.name+"/renew", map[string]any{"lease_id": c.leaseID, "ttl_ms": leaseTTL.Milliseconds()})
		case "put":
			rep = s.call(ctx, "PUT", "/v1/resources/"+c.resource, []byte(o.value),
				"Fencing-Token", strconv.FormatInt(o.token, 10), "Lease-Name", c.name, "Content-Type", "text/plain")
		case "release":
			rep = s.call(ctx, "POST", "/v1/leases/"+c.name+"/release", map[string]any{"lease_id": c.leaseID})
		}
		if rep.err != nil {
			c.pending = &o
			w.fig.unknown.Add(1)
			return
		}
		if w.ack(c, o, rep, floor); c.pending != nil {
			return
		}
	}
}

// ack applies one answered operation to the model.
func (w *workload) ack(c *worker, o op, rep reply, floor int64) {
	if rep.status >= 500 {
		// The server failed (e.g. its disk went away): it did not acknowledge, so it may or
		// may not have acted.
		if w.only503 && (rep.status != http.StatusServiceUnavailable || rep.header.Get("Retry-After") == "") {
			w.fail("%s %s: status %d (Retry-After %q), want 503 with Retry-After: %s", o.kind, c.name, rep.status, rep.header.Get("Retry-After"), rep.body)
		}
		c.pending = &o
		w.fig.unknown.Add(1)
		return
	}
	want := http.StatusOK
	switch {
	case o.kind == "release":
		want = http.StatusNoContent
	case o.kind == "put" && rep.status == http.StatusCreated:
		want = http.StatusCreated // the write created the resource
	}
	if rep.status != want {
		w.fail("%s %s: status %d, want %d: %s", o.kind, c.name, rep.status, want, rep.body)
		w.fig.lost.Add(1)
		c.pending = &o // the model no longer knows: resolve from the server at the next check
		return
	}
	w.fig.acked.Add(1)
	switch o.kind {
	case "acquire", "renew":
		l, err := decode[leaseReply](rep)
		if err != nil {
			w.fail("%s %s: %v", o.kind, c.name, err)
			return
		}
		if o.kind == "acquire" {
			if l.Token <= floor {
				w.fail("acquire %s: token %d, not above the acknowledged %d", c.name, l.Token, floor)
				w.fig.regressions.Add(1)
			}
			c.held, c.leaseID, c.token = true, l.LeaseID, l.Token
			raise(&w.maxToken, l.Token)
		} else if l.Token != c.token {
			w.fail("renew %s: token %d, want %d", c.name, l.Token, c.token)
		}
		c.expires = l.ExpiresAt
	case "put":
		c.putValue, c.putFence = o.value, o.token
	case "release":
		c.held = false
	}
}

func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// verify checks, on a server restarted after a fault, that every acknowledged operation is
// there, allowing either outcome only for the one operation each client had in flight. It then
// brings the model in line with the server (ending grants whose lease_id the client never got).
func (w *workload) verify(ctx context.Context, s *server) {
	var wg sync.WaitGroup
	for _, c := range w.clients {
		wg.Go(func() { w.verifyOne(ctx, s, c) })
	}
	wg.Wait()
}

func (w *workload) lose(format string, args ...any) {
	w.fig.lost.Add(1)
	w.fail(format, args...)
}

func (w *workload) verifyOne(ctx context.Context, s *server, c *worker) {
	p := c.pending
	c.pending = nil
	var st leaseReply
	rep := s.call(ctx, "GET", "/v1/leases/"+c.name, nil)
	switch {
	case rep.err != nil:
		w.fail("get %s: %v", c.name, rep.err)
		return
	case rep.status == http.StatusNotFound:
	case rep.status == http.StatusOK:
		var err error
		if st, err = decode[leaseReply](rep); err != nil || st.Held == nil {
			w.fail("get %s: %v %s", c.name, err, rep.body)
			return
		}
	default:
		w.fail("get %s: status %d: %s", c.name, rep.status, rep.body)
		return
	}
	held := st.Held != nil && *st.Held
	w.fig.checked.Add(1)
	switch {
	case p != nil && p.kind == "acquire" && held && st.Token > c.token:
		// The acquire in flight was granted; its lease_id never arrived: end it.
		if st.Token <= p.floor {
			w.fig.regressions.Add(1)
			w.fail("%s: unacknowledged grant %d not above the %d acknowledged before it was asked", c.name, st.Token, p.floor)
		}
		if r := s.call(ctx, "DELETE", "/v1/leases/"+c.name, nil); r.err != nil || r.status != http.StatusNoContent {
			w.fail("revoke %s: %v %d %s", c.name, r.err, r.status, r.body)
		}
		raise(&w.maxToken, st.Token)
		c.held, c.token = false, st.Token
	case p != nil && p.kind == "release" && !held:
		c.held = false
	case c.held:
		if !held || st.Token != c.token {
			w.lose("%s: acknowledged grant %d (expires %v) not held after the fault: held=%v token=%d", c.name, c.token, c.expires, held, st.Token)
			c.held = held && st.Token == c.token
			break
		}
		if st.ExpiresAt.Before(c.expires.Truncate(time.Millisecond)) {
			w.lose("%s: acknowledged expiry %v, after the fault %v", c.name, c.expires, st.ExpiresAt)
		}
	case held:
		w.lose("%s: released (or never granted) but held after the fault with token %d (acknowledged %d)", c.name, st.Token, c.token)
	}
	w.verifyResource(ctx, s, c, p)
}

func (w *workload) verifyResource(ctx context.Context, s *server, c *worker, p *op) {
	rep := s.call(ctx, "GET", "/v1/resources/"+c.resource, nil)
	if rep.err != nil {
		w.fail("get resource %s: %v", c.resource, rep.err)
		return
	}
	w.fig.checked.Add(1)
	inFlight := p != nil && p.kind == "put"
	if rep.status == http.StatusNotFound {
		if c.putValue != "" {
			w.lose("%s: acknowledged write %q (fence %d) missing after the fault", c.resource, c.putValue, c.putFence)
		}
		return
	}
	fence, _ := strconv.ParseInt(rep.header.Get("Fencing-Token"), 10, 64)
	got := string(rep.body)
	switch {
	case got == c.putValue && fence == c.putFence:
	case inFlight && got == p.value && fence == p.token:
		c.putValue, c.putFence = p.value, p.token
	default:
		w.lose("%s: after the fault %q fence %d, want the acknowledged %q fence %d", c.resource, got, fence, c.putValue, c.putFence)
		c.putValue, c.putFence = got, fence
	}
}

// report logs the figures and fails the test with the first failures, if any.
func (w *workload) report(t testing.TB, what string) {
	t.Helper()
	t.Logf("%s: %s", what, &w.fig)
	fmt.Printf("FAULTS %s: %s\n", what, &w.fig)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.failures {
		t.Error(f)
	}
}

// logFirst logs the first n failures the checks found (for negative controls, which must find some).
func (w *workload) logFirst(t testing.TB, n int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.failures[:min(n, len(w.failures))] {
		t.Log("found: " + f)
	}
}
