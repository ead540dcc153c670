package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
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
	got := make(chan client.Event, 10)
	go c.Watch(ctx, "w.", func(e client.Event) error { got <- e; return nil })
	time.Sleep(200 * time.Millisecond) // let the stream open: it starts at the newest event
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
			OnStartedLeading: func(ctx context.Context, token int64) {
				cand.mu.Lock()
				cand.leading, cand.token = true, token
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
	t.Cleanup(func() { cancel(); <-cand.done })
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
			<-leader.done
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
