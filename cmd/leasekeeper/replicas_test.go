package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// startReplicas runs n real `leasekeeper serve` processes on one new PostgreSQL database, with
// one shared secret, and returns them with the database's URL.
func startReplicas(t *testing.T, n int) ([]*proc, string) {
	t.Helper()
	url := pg.NewDatabase(t)
	secret := filepath.Join(t.TempDir(), "secret")
	var ps []*proc
	for range n {
		ps = append(ps, startBinary(t, "--db", url, "--secret-file", secret))
	}
	return ps, url
}

// waitAcquire starts an acquire that waits in line on p, answering on the returned channel
// (nil when the request failed, as when p dies).
func waitAcquire(t *testing.T, p *proc, name, holder string, wait time.Duration) <-chan *api.AcquireLeaseResponse {
	t.Helper()
	c, err := api.NewClientWithResponses(p.url, api.WithHTTPClient(&http.Client{Timeout: wait + 10*time.Second,
		Transport: servicetest.BearerTransport{Key: testAdminKey}}))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *api.AcquireLeaseResponse, 1)
	go func() {
		r, err := c.AcquireLeaseWithResponse(context.Background(), name, nil,
			api.AcquireRequest{Holder: holder, TtlMs: 60000, WaitMs: ptrTo(wait.Milliseconds())})
		if err != nil {
			r = nil
		}
		out <- r
	}()
	return out
}

// waitWaitersOn waits until p counts want waiters for name.
func waitWaitersOn(t *testing.T, p *proc, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := p.c.GetLeaseWithResponse(context.Background(), name)
		if err == nil && r.JSON200 != nil && r.JSON200.Waiters == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d waiters (%v, %v)", name, want, r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicasKill9: three real replicas on one PostgreSQL database serve 48 clients that
// contend on a few names; one replica is killed with SIGKILL mid-run. The clients of the other
// two see no error, those of the dead one move to the next replica (as a load balancer would),
// every acknowledged operation is in the history, which shows no overlap and strictly growing
// tokens; and the dead replica's waiter leaves the line, so the waiter behind it, on another
// replica, is granted the name when it is released.
func TestReplicasKill9(t *testing.T) {
	needBinary(t)
	ps, url := startReplicas(t, 3)
	ctx := context.Background()
	victim := ps[2]

	// The line of "line": held through ps[0]; first in line on the victim, then on ps[1].
	holder := ps[0].acquire(t, "line", time.Minute)
	doomed := waitAcquire(t, victim, "line", "on-victim", 30*time.Second)
	waitWaitersOn(t, ps[0], "line", 1)
	survivor := waitAcquire(t, ps[1], "line", "on-survivor", 30*time.Second)
	waitWaitersOn(t, ps[0], "line", 2)

	names := []string{"hot-0", "hot-1", "hot-2", "hot-3"}
	var mu sync.Mutex
	var acks []ack
	var grants atomic.Int64
	record := func(a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
		if a.op == "acquire" {
			grants.Add(1)
		}
	}
	// Each phase runs at least its time and until the history has enough grants to mean
	// contention (a slow machine, or -race, serves fewer a second), within a bound.
	phase := func(least time.Duration, grantsBy int64) {
		start := time.Now()
		for time.Since(start) < least || grants.Load() < grantsBy && time.Since(start) < 30*time.Second {
			time.Sleep(50 * time.Millisecond)
		}
	}
	var killed atomic.Bool
	var survivorErrs, moved atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 48 {
		wg.Go(func() {
			home := c % 3
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := ps[home]
				name := names[(c+i)%len(names)]
				// A failed request was never acknowledged; on the victim after the kill the
				// client moves on, anywhere else it is an error.
				failed := func(err error, status int) bool {
					if err == nil && status < 500 {
						return false
					}
					if p == victim && killed.Load() {
						home = (home + 1) % 3
						moved.Add(1)
						return true
					}
					if p != victim {
						survivorErrs.Add(1)
						t.Errorf("client %d on a surviving replica: %v, status %d", c, err, status)
					}
					return true
				}
				r, err := p.c.AcquireLeaseWithResponse(ctx, name, nil, api.AcquireRequest{Holder: fmt.Sprintf("c%d", c), TtlMs: 5000})
				if failed(err, httpStatus(r, err)) || r.JSON200 == nil {
					continue
				}
				l := r.JSON200
				record(ack{"acquire", name, l.Token, l.ExpiresAt.Time})
				rn, err := p.c.RenewLeaseWithResponse(ctx, name, api.RenewRequest{LeaseId: *l.LeaseId})
				if failed(err, httpStatus(rn, err)) {
					continue
				}
				if rn.JSON200 != nil {
					record(ack{"renew", name, l.Token, rn.JSON200.ExpiresAt.Time})
				}
				rel, err := p.c.ReleaseLeaseWithResponse(ctx, name, api.ReleaseRequest{LeaseId: *l.LeaseId})
				if failed(err, httpStatus(rel, err)) {
					continue
				}
				if rel.StatusCode() == http.StatusNoContent {
					record(ack{"release", name, l.Token, time.Time{}})
				}
			}
		})
	}
	phase(1500*time.Millisecond, 15)
	killed.Store(true)
	victim.kill9(t)
	killedAt := time.Now()
	phase(1500*time.Millisecond, grants.Load()+15)
	close(stop)
	wg.Wait()

	if r := <-doomed; r != nil && r.StatusCode() == http.StatusOK {
		t.Errorf("the waiter on the killed replica was granted the lease: %s", r.Body)
	}
	rel, err := ps[0].c.ReleaseLeaseWithResponse(ctx, "line", api.ReleaseRequest{LeaseId: *holder.LeaseId})
	if err != nil || rel.StatusCode() != http.StatusNoContent {
		t.Fatalf("release line = %v, %v", rel, err)
	}
	released := time.Now()
	select {
	case r := <-survivor:
		if r == nil || r.JSON200 == nil || r.JSON200.Holder != "on-survivor" {
			t.Fatalf("the waiter behind the dead replica's = %v; want granted", r)
		}
		t.Logf("the waiter behind the dead replica's was granted %v after the release", time.Since(released))
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter behind the dead replica's waiter was not granted 15 s after the release")
	}

	counts := map[string]int{}
	for _, a := range acks {
		counts[a.op]++
	}
	t.Logf("%d operations acknowledged (%v); %d requests moved off the killed replica in the %v after the kill; %d errors on the survivors",
		len(acks), counts, moved.Load(), time.Since(killedAt).Round(time.Millisecond), survivorErrs.Load())
	if counts["acquire"] < 20 {
		t.Errorf("only %d grants: not contention", counts["acquire"])
	}
	checkReplicaHistory(t, url, names, acks)
}

func httpStatus(r interface{ StatusCode() int }, err error) int {
	if err != nil {
		return 0
	}
	return r.StatusCode()
}

// checkReplicaHistory reads the history of names from the database: each name's shows no
// overlap and growing tokens, every grant's token is above all granted before it in commit
// order, and every acknowledged operation is there.
func checkReplicaHistory(t *testing.T, url string, names []string, acks []ack) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type key struct {
		typ   lease.EventType
		token int64
	}
	seen := map[key]lease.Event{}
	for _, n := range names {
		evs := allEvents(t, st, store.EventFilter{Name: n})
		if err := storetest.CheckHistory(evs); err != nil {
			t.Errorf("history of %s: %v", n, err)
		}
		for _, e := range evs {
			seen[key{e.Type, e.Token}] = e
		}
	}
	var last int64
	for _, e := range allEvents(t, st, store.EventFilter{}) {
		if e.Type == lease.EventAcquired {
			if e.Token <= last {
				t.Errorf("seq %d granted token %d after token %d", e.Seq, e.Token, last)
			}
			last = e.Token
		}
	}
	want := map[string]lease.EventType{"acquire": lease.EventAcquired, "renew": lease.EventRenewed, "release": lease.EventReleased}
	for _, a := range acks {
		e, ok := seen[key{want[a.op], a.token}]
		if !ok {
			t.Errorf("%s of %s token %d was acknowledged but is not in the history", a.op, a.name, a.token)
			continue
		}
		if a.op == "renew" && !e.ExpiresAt.Equal(a.expiresAt) {
			t.Errorf("renew of %s token %d acknowledged until %v, history says %v", a.name, a.token, a.expiresAt, e.ExpiresAt)
		}
	}
}

// allEvents reads every page of the events f selects.
func allEvents(t *testing.T, st store.Store, f store.EventFilter) []lease.Event {
	t.Helper()
	f.Limit = store.MaxLimit
	var out []lease.Event
	for {
		p, err := st.Events(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}

// TestDatabaseRestart measures what holders and waiters see while the database restarts under
// two real replicas, and checks what must hold: the holder renewing every 200 ms through one
// replica keeps its lease and its token (its renews fail with 503 during the restart, nothing
// else), the replicas serve again without a restart of their own, and the waiter on the other
// replica is granted the name after the holder releases it.
func TestDatabaseRestart(t *testing.T) {
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) { testDatabaseRestart(t, mode) })
	}
}

func testDatabaseRestart(t *testing.T, mode string) {
	needBinary(t)
	ps, _ := startReplicas(t, 2)
	ctx := context.Background()
	held := ps[0].acquire(t, "held", 10*time.Second)
	waiter := waitAcquire(t, ps[1], "held", "waiter", 60*time.Second)
	waitWaitersOn(t, ps[0], "held", 1)

	type try struct {
		at     time.Time
		status int
	}
	var mu sync.Mutex
	var renews []try
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			r, err := ps[0].c.RenewLeaseWithResponse(ctx, "held", api.RenewRequest{LeaseId: *held.LeaseId})
			mu.Lock()
			renews = append(renews, try{time.Now(), httpStatus(r, err)})
			mu.Unlock()
		}
	}()
	// A balancer's health check on the other replica, every 50 ms.
	ready := map[int]int{}
	checking := make(chan struct{})
	go func() {
		defer close(checking)
		hc := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			resp, err := hc.Get(ps[1].url + "/readyz")
			code := 0
			if err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			ready[code]++
			mu.Unlock()
		}
	}()
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	pg.Restart(t, mode)
	restarted := time.Since(began)
	// Serving again: the first renew that succeeds after the restart.
	var back time.Duration
	for deadline := time.Now().Add(20 * time.Second); back == 0; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		for _, r := range renews {
			if r.at.After(began) && r.status == http.StatusOK && r.at.Sub(began) > restarted {
				back = r.at.Sub(began)
				break
			}
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no renew succeeded 20 s after the database restarted: %v", renews)
		}
	}
	time.Sleep(time.Second)
	close(stop)
	<-done
	<-checking
	if ready[http.StatusServiceUnavailable] == 0 || ready[http.StatusOK] == 0 {
		t.Errorf("/readyz of the other replica answered %v across the restart, want 503 while the database was away and 200 otherwise", ready)
	}
	codes := map[int]int{}
	for _, r := range renews {
		if r.at.After(began) {
			codes[r.status]++
		}
	}
	for code := range codes {
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Errorf("renews during the restart answered %d (%v), want only 200 and 503", code, codes)
		}
	}
	st, err := ps[1].c.GetLeaseWithResponse(ctx, "held")
	if err != nil || st.JSON200 == nil || !st.JSON200.Held || st.JSON200.Token != held.Token {
		t.Fatalf("after the restart, held = %v, %v; want held by token %d", st, err, held.Token)
	}
	rel, err := ps[0].c.ReleaseLeaseWithResponse(ctx, "held", api.ReleaseRequest{LeaseId: *held.LeaseId})
	if err != nil || rel.StatusCode() != http.StatusNoContent {
		t.Fatalf("release after the restart = %v, %v", rel, err)
	}
	released := time.Now()
	select {
	case r := <-waiter:
		if r == nil || r.JSON200 == nil || r.JSON200.Holder != "waiter" {
			t.Fatalf("the waiter after the restart = %v; want granted", r)
		}
		t.Logf("restart (%s) took %v; renews every 200 ms answered %v from its start, the first 200 %v after it; /readyz answered %v; the waiter was granted %v after the release",
			mode, restarted.Round(time.Millisecond), codes, back.Round(time.Millisecond), ready, time.Since(released).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter was not granted 15 s after the release")
	}
}
