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
		c.Elect(ctx, "leader", name, map[string]any{"addr": name + ":9000"}, client.ElectionConfig{
			TTL:             time.Second,
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
			err := c.Elect(ctx, tt.election, tt.candidate, nil, client.ElectionConfig{TTL: tt.ttl})
			if !errors.Is(err, client.ErrInvalid) || ctx.Err() != nil {
				t.Errorf("Elect = %v (context: %v), want ErrInvalid at once", err, ctx.Err())
			}
			e := c.NewElection(tt.election, tt.candidate)
			e.TTL = tt.ttl
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
	ea, eb := a.NewElection("leader", "node-a"), b.NewElection("leader", "node-b")
	ea.Metadata = map[string]any{"addr": "a:9000"}
	eb.Metadata = map[string]any{"addr": "b:9000"}
	ea.TTL, eb.TTL = 10*time.Second, 10*time.Second

	if _, err := a.Leader(ctx, "leader"); !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("Leader before any term = %v, want ErrNoLeader", err)
	}
	watcher := newClient(t, url)
	seen, err := watcher.NewElection("leader", "").Observe(ctx)
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

// TestElectObserveOnly follows an election without campaigning.
func TestElectObserveOnly(t *testing.T) {
	url := newServer(t)
	c := newClient(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan client.Leader, 4)
	done := make(chan error, 1)
	go func() {
		done <- c.Elect(ctx, "leader", "", nil, client.ElectionConfig{ObserveOnly: true,
			OnStartedLeading: func(context.Context, *client.Lease) { t.Error("an observer started leading") },
			OnNewLeader:      func(l client.Leader) { seen <- l }})
	}()
	term, err := newClient(t, url).NewElection("leader", "node-1").Campaign(ctx)
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
	if err := testwait.Receive(t, done, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Elect(observe only) = %v, want context.Canceled", err)
	}
	term.Release(context.Background())
}
