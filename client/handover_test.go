package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestHandoverFromRenewal: without a watch stream, the holder learns of a handover request
// from its next renewal: HandoverRequested closes, Handover and OnHandover carry the request,
// and the lease stays held.
func TestHandoverFromRenewal(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	called := make(chan client.HandoverRequest, 1)
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Minute, DisableKeepAlive: true, DisableWatch: true,
		OnHandover: func(_ *client.Lease, h client.HandoverRequest) { called <- h }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RequestHandover(ctx, "free-never-used", "", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("RequestHandover(never used) = %v, want ErrNotFound", err)
	}
	asked, err := c.RequestHandover(ctx, "job", "b", "deploy")
	if err != nil || asked.Token != l.Token() || asked.To != "b" || asked.Reason != "deploy" || asked.By == "" {
		t.Fatalf("RequestHandover = %+v, %v; want token %d to b for deploy, with who asked", asked, err, l.Token())
	}
	select {
	case <-l.HandoverRequested():
		t.Fatal("HandoverRequested closed before any renewal or stream told the lease")
	default:
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew = %v", err)
	}
	testwait.Receive(t, l.HandoverRequested(), 5*time.Second)
	if h := l.Handover(); h == nil || *h != asked {
		t.Errorf("Handover() = %+v, want %+v", h, asked)
	}
	if got := testwait.Receive(t, called, 5*time.Second); got != asked {
		t.Errorf("OnHandover got %+v, want %+v", got, asked)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("lease context = %v, want alive: a handover forces nothing", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
}

// TestHandoverFromWatch: a kept-alive lease learns of the request from the watch stream, long
// before its next renewal.
func TestHandoverFromWatch(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// The stream may not be open yet: ask again until the lease hears (a repeat replaces).
	eventually(t, 5*time.Second, "the handover request seen on the watch stream", func() bool {
		if _, err := c.RequestHandover(ctx, "job", "", "roll"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.HandoverRequested():
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	if h := l.Handover(); h == nil || h.Reason != "roll" || h.Token != l.Token() {
		t.Errorf("Handover() = %+v, want the request for token %d", h, l.Token())
	}
}

// TestElectHandsOver: a leader asked to hand over to a waiting candidate steps down, and that
// candidate leads next, ahead of one that waited longer.
func TestElectHandsOver(t *testing.T) {
	url := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 10)
	var wg sync.WaitGroup
	elect := func(candidate string) {
		c := newClient(t, url)
		wg.Go(func() {
			c.NewElection("leader", client.ElectionOptions{Candidate: candidate, TTL: time.Hour}).Run(ctx, client.RunOptions{ReleaseOnCancel: true,
				OnStartedLeading: func(ctx context.Context, term *client.Lease) {
					started <- candidate
					<-ctx.Done()
				}})
		})
	}
	elect("a")
	if got := testwait.Receive(t, started, 5*time.Second); got != "a" {
		t.Fatalf("first leader = %s, want a", got)
	}
	c := newClient(t, url)
	elect("b")
	eventually(t, 5*time.Second, "b in line", func() bool { st, err := c.Get(ctx, "leader"); return err == nil && st.Waiters == 1 })
	elect("c")
	eventually(t, 5*time.Second, "c in line", func() bool { st, err := c.Get(ctx, "leader"); return err == nil && st.Waiters == 2 })
	if _, err := c.RequestHandover(ctx, "leader", "c", "deploy"); err != nil {
		t.Fatal(err)
	}
	if got := testwait.Receive(t, started, 5*time.Second); got != "c" {
		t.Errorf("leader after the handover = %s, want c (named by the request, ahead of b)", got)
	}
	cancel()
	wg.Wait()
}
