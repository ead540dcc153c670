package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

func TestAcquireAfterLongServerWaitIsUsable(t *testing.T) {
	url := newServer(t)
	c := newClient(t, url)
	ctx := context.Background()
	first, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Second, DisableKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = first // left to expire: the waiter below is granted after more than its own ttl
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "b", TTL: 1200 * time.Millisecond, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire(wait) = %v", err)
	}
	defer l.Release(ctx)
	if err := l.Context().Err(); err != nil {
		t.Fatalf("lease context after a wait longer than the ttl = %v, want alive", context.Cause(l.Context()))
	}
	if l.Token() <= first.Token() {
		t.Errorf("token %d, want > %d", l.Token(), first.Token())
	}
}

func TestWatchDeliversEventsInOrder(t *testing.T) {
	url := newServer(t)
	c := newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, probed := make(chan client.Event, 10), make(chan client.Event, 100)
	go c.Watch(ctx, "w.", func(e client.Event) error {
		if e.Name == "w.probe" {
			probed <- e
		} else {
			got <- e
		}
		return nil
	})
	// The stream starts at the newest event: it is open once an event made after it arrives.
	for open := false; !open; {
		p, err := c.Acquire(ctx, "w.probe", client.AcquireOptions{TTL: 2 * time.Second, DisableKeepAlive: true})
		if err != nil {
			t.Fatal(err)
		}
		p.Release(ctx)
		select {
		case <-probed:
			open = true
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the watch stream did not open")
		}
	}
	l, err := c.Acquire(ctx, "w.job", client.AcquireOptions{Holder: "a", TTL: 2 * time.Second, Metadata: map[string]any{"addr": "x:1"}, DisableKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "other", client.AcquireOptions{Holder: "a", TTL: 2 * time.Second, DisableKeepAlive: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acquired", "released"} {
		select {
		case e := <-got:
			if e.Type != want || e.Name != "w.job" || e.Token != l.Token() {
				t.Errorf("event = %+v, want %s of w.job", e, want)
			}
			if want == "acquired" && e.Metadata["addr"] != "x:1" {
				t.Errorf("metadata = %v, want the leader's address", e.Metadata)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
	}
}

// candidate is one participant of an election test.
type candidate struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading bool
	token   int64
	leaders []client.Leader
}

func (c *candidate) snapshot() (bool, int64, []client.Leader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading, c.token, append([]client.Leader(nil), c.leaders...)
}

func startCandidate(t *testing.T, url, name string, releaseOnCancel bool) *candidate {
	t.Helper()
	c := newClient(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	cand := &candidate{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cand.done)
		e := c.NewElection("leader", client.ElectionOptions{Candidate: name, TTL: time.Second, Metadata: map[string]any{"addr": name + ":9000"}})
		e.Run(ctx, client.RunOptions{
			ReleaseOnCancel: releaseOnCancel,
			OnStartedLeading: func(ctx context.Context, term *client.Lease) {
				cand.mu.Lock()
				cand.leading, cand.token = true, term.Token()
				cand.mu.Unlock()
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				cand.mu.Lock()
				cand.leading = false
				cand.mu.Unlock()
			},
			OnNewLeader: func(l client.Leader) {
				cand.mu.Lock()
				cand.leaders = append(cand.leaders, l)
				cand.mu.Unlock()
			},
		})
	}()
	t.Cleanup(func() { cancel(); testwait.Receive(t, cand.done, 10*time.Second) })
	return cand
}

func TestElection(t *testing.T) {
	for _, tc := range []struct {
		name            string
		releaseOnCancel bool
	}{{"LeaderDies", false}, {"LeaderStepsDown", true}} {
		t.Run(tc.name, func(t *testing.T) {
			url := newServer(t)
			cands := []*candidate{}
			for i := range 3 {
				cands = append(cands, startCandidate(t, url, fmt.Sprintf("node-%d", i), tc.releaseOnCancel))
			}
			var leader *candidate
			eventually(t, 5*time.Second, "one leader", func() bool {
				n := 0
				for _, c := range cands {
					if l, _, _ := c.snapshot(); l {
						n, leader = n+1, c
					}
				}
				return n == 1
			})
			_, oldToken, _ := leader.snapshot()
			eventually(t, 5*time.Second, "everyone observing the leader", func() bool {
				for _, c := range cands {
					_, _, seen := c.snapshot()
					if len(seen) == 0 || seen[len(seen)-1].Token != oldToken || seen[len(seen)-1].Metadata["addr"] != leader.name+":9000" {
						return false
					}
				}
				return true
			})

			leader.cancel() // the leader goes away: dies (lease runs out) or steps down (release)
			testwait.Receive(t, leader.done, 10*time.Second)
			var next *candidate
			eventually(t, 5*time.Second, "a new leader", func() bool {
				for _, c := range cands {
					if l, _, _ := c.snapshot(); l && c != leader {
						next = c
						return true
					}
				}
				return false
			})
			_, newToken, _ := next.snapshot()
			if newToken <= oldToken {
				t.Errorf("new term token %d, want > %d", newToken, oldToken)
			}
			for _, c := range cands {
				if c == leader {
					continue
				}
				eventually(t, 5*time.Second, c.name+" observing the new leader", func() bool {
					_, _, seen := c.snapshot()
					return len(seen) > 0 && seen[len(seen)-1].Holder == next.name && seen[len(seen)-1].Token == newToken
				})
			}
			n := 0
			for _, c := range cands {
				if l, _, _ := c.snapshot(); l {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d leaders after the takeover, want 1", n)
			}
		})
	}
}

// TestCampaignConfigurationErrors checks that a campaign that cannot succeed says so at once
// instead of retrying until its context ends.
func TestCampaignConfigurationErrors(t *testing.T) {
	c := newClient(t, newServer(t))
	tests := []struct {
		name, election, candidate string
		ttl                       time.Duration
	}{
		{"ErrInvalidName", "bad/name", "node-1", time.Second},
		{"ErrEmptyCandidate", "leader", "", time.Second},
		{"ErrTTLBelowServerMinimum", "leader", "node-1", 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e := c.NewElection(tt.election, client.ElectionOptions{Candidate: tt.candidate, TTL: tt.ttl})
			if err := e.Run(ctx, client.RunOptions{}); !errors.Is(err, client.ErrInvalid) || ctx.Err() != nil {
				t.Errorf("Run = %v (context: %v), want ErrInvalid at once", err, ctx.Err())
			}
			if l, err := e.Campaign(ctx); !errors.Is(err, client.ErrInvalid) || ctx.Err() != nil {
				t.Errorf("Campaign = %v, %v (context: %v), want ErrInvalid at once", l, err, ctx.Err())
			}
		})
	}
}

// TestElectionImperative runs two candidates through Campaign, Observe, Leader and Resign.
func TestElectionImperative(t *testing.T) {
	url := newServer(t)
	a, b := newClient(t, url), newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ea := a.NewElection("leader", client.ElectionOptions{Candidate: "node-a", TTL: 10 * time.Second, Metadata: map[string]any{"addr": "a:9000"}})
	eb := b.NewElection("leader", client.ElectionOptions{Candidate: "node-b", TTL: 10 * time.Second, Metadata: map[string]any{"addr": "b:9000"}})

	if _, err := a.Leader(ctx, "leader"); !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("Leader before any term = %v, want ErrNoLeader", err)
	}
	watcher := newClient(t, url)
	seen, err := watcher.NewElection("leader", client.ElectionOptions{}).Observe(ctx)
	if err != nil {
		t.Fatalf("Observe = %v", err)
	}
	termA, err := ea.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign a = %v", err)
	}
	if again, err := ea.Campaign(ctx); err != nil || again != termA {
		t.Errorf("Campaign while leading = %p, %v; want the current term %p", again, err, termA)
	}
	won := make(chan *client.Lease, 1)
	go func() {
		l, err := eb.Campaign(ctx)
		if err != nil {
			t.Errorf("Campaign b = %v", err)
		}
		won <- l
	}()
	if l := testwait.Receive(t, seen, 10*time.Second); l.Holder != "node-a" || l.Token != termA.Token() || l.Metadata["addr"] != "a:9000" {
		t.Errorf("observed %+v, want node-a's term %d", l, termA.Token())
	}
	if got, err := b.Leader(ctx, "leader"); err != nil || got.Holder != "node-a" {
		t.Errorf("Leader = %+v, %v; want node-a", got, err)
	}
	// The leader proclaims a new address: same term, and observers see it.
	if err := eb.Proclaim(ctx, map[string]any{"addr": "b:9999"}); !errors.Is(err, client.ErrNotLeader) {
		t.Errorf("Proclaim by a follower = %v, want ErrNotLeader", err)
	}
	if err := ea.Proclaim(ctx, map[string]any{"addr": "a:9100"}); err != nil {
		t.Fatalf("Proclaim = %v", err)
	}
	if l := <-seen; l.Holder != "node-a" || l.Token != termA.Token() || l.Metadata["addr"] != "a:9100" {
		t.Errorf("observed after Proclaim %+v, want node-a's term %d at a:9100", l, termA.Token())
	}
	if got, err := b.Leader(ctx, "leader"); err != nil || got.Token != termA.Token() || got.Metadata["addr"] != "a:9100" {
		t.Errorf("Leader after Proclaim = %+v, %v; want the same term at a:9100", got, err)
	}
	waiters(t, a, "leader", 1)
	if err := ea.Resign(ctx); err != nil {
		t.Fatalf("Resign = %v", err)
	}
	if !isDone(termA.Context()) {
		t.Error("a's term context still live after Resign")
	}
	termB := testwait.Receive(t, won, 10*time.Second)
	if termB == nil || termB.Token() <= termA.Token() {
		t.Fatalf("b's term = %v, want a token above %d", termB, termA.Token())
	}
	if l := testwait.Receive(t, seen, 10*time.Second); l.Holder != "node-b" || l.Token != termB.Token() {
		t.Errorf("observed %+v, want node-b's term %d", l, termB.Token())
	}
	if err := eb.Resign(ctx); err != nil {
		t.Errorf("Resign b = %v", err)
	}
}

// TestElectionObserver follows an election without campaigning: an Election without a
// candidate observes, and never stands in line.
func TestElectionObserver(t *testing.T) {
	url := newServer(t)
	c := newClient(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	observer := c.NewElection("leader", client.ElectionOptions{})
	seen, err := observer.Observe(ctx)
	if err != nil {
		t.Fatalf("Observe = %v", err)
	}
	if err := observer.Run(ctx, client.RunOptions{}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Run without a candidate = %v, want ErrInvalid", err)
	}
	term, err := newClient(t, url).NewElection("leader", client.ElectionOptions{Candidate: "node-1"}).Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign = %v", err)
	}
	if l := testwait.Receive(t, seen, 10*time.Second); l.Holder != "node-1" || l.Token != term.Token() {
		t.Errorf("observed %+v, want node-1", l)
	}
	if st, err := c.Get(ctx, "leader"); err != nil || st.Waiters != 0 || st.Holder != "node-1" {
		t.Errorf("state = %+v, %v; want node-1 holding and nobody waiting", st, err)
	}
	cancel()
	for range seen {
	}
	term.Release(context.Background())
}

// TestElectionUnderSession: a candidate whose terms are held under a session leads as the
// session's holder, its term lasts as the session does, and closing the session hands the
// leadership to the next candidate at once. Such a term cannot proclaim: the server renews it
// only through its session.
func TestElectionUnderSession(t *testing.T) {
	url := newServer(t)
	c := newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "node-s", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e := s.NewElection("leader", client.ElectionOptions{Metadata: map[string]any{"addr": "s:9000"}})
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign = %v", err)
	}
	if got, err := c.Leader(ctx, "leader"); err != nil || got.Holder != "node-s" || got.Token != term.Token() || got.Metadata["addr"] != "s:9000" {
		t.Errorf("Leader = %+v, %v; want node-s (the session's holder) at s:9000, token %d", got, err, term.Token())
	}
	if st, err := c.Get(ctx, "leader"); err != nil || st.TTL != time.Minute {
		t.Errorf("state = %+v, %v; want the session's ttl", st, err)
	}
	if err := e.Proclaim(ctx, map[string]any{"addr": "s:9100"}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Proclaim under a session = %v, want ErrInvalid", err)
	}
	won := make(chan *client.Lease, 1)
	go func() {
		l, err := newClient(t, url).NewElection("leader", client.ElectionOptions{Candidate: "node-b", TTL: time.Minute}).Campaign(ctx)
		if err != nil {
			t.Errorf("Campaign b = %v", err)
		}
		won <- l
	}()
	waiters(t, c, "leader", 1)
	if err := s.Close(ctx); err != nil {
		t.Fatalf("session Close = %v", err)
	}
	testwait.Receive(t, term.Context().Done(), 5*time.Second)
	if next := testwait.Receive(t, won, 10*time.Second); next == nil || next.Token() <= term.Token() {
		t.Errorf("next term = %v, want one above %d", next, term.Token())
	}
}

// TestElectionRunUnderSessionReleases: a term under a session would never run out (the
// session keeps renewing it), so Run releases it when its context ends even without
// ReleaseOnCancel.
func TestElectionRunUnderSessionReleases(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.OpenSession(ctx, client.SessionOptions{Holder: "node-s", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	runCtx, stop := context.WithCancel(ctx)
	leading := make(chan int64, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.NewElection("leader", client.ElectionOptions{}).Run(runCtx, client.RunOptions{
			OnStartedLeading: func(ctx context.Context, term *client.Lease) {
				leading <- term.Token()
				<-ctx.Done()
			}})
	}()
	token := testwait.Receive(t, leading, 10*time.Second)
	stop()
	if err := testwait.Receive(t, done, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if st, err := c.Get(ctx, "leader"); err != nil || st.Held || st.Token != token || st.End != client.EventReleased {
		t.Errorf("state after Run = %+v, %v; want token %d released", st, err, token)
	}
}
