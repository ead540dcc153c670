package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestLeasesShareOneWatchStream: a client's kept-alive leases follow their names on one watch
// stream, not one each (the server bounds a key's streams), widened to a name outside its
// prefix when needed; every lease still learns from it at once that it was revoked (the
// client's clock stands still: no renewal and no deadline can tell it), and the stream
// closes with the last lease.
func TestLeasesShareOneWatchStream(t *testing.T) {
	url := newServer(t)
	p := newProxy(t, url)
	c := newClient(t, p.URL, client.WithClock(newFakeClock(base)))
	admin := newClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var leases []*client.Lease
	for _, name := range []string{"jobs-a", "jobs-b", "jobs-c", "other", "jobs-d"} {
		l, err := c.Acquire(ctx, name, client.AcquireOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	// Opening, then widening twice at most: "jobs-a", "jobs-", "".
	eventually(t, 5*time.Second, "one watch stream open", func() bool { return p.streams.Load() == 1 })
	if n := len(p.requests("/v1/watch")); n > 3 {
		t.Errorf("%d watch requests for 5 leases, want at most 3", n)
	}
	for _, l := range leases {
		if err := admin.Revoke(ctx, l.Name()); err != nil {
			t.Fatal(err)
		}
		testwait.Receive(t, l.Context().Done(), 5*time.Second)
		if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) || !strings.Contains(cause.Error(), "revoked") {
			t.Errorf("%s: context ended with %v, want ErrLeaseLost: revoked", l.Name(), cause)
		}
		if n := p.streams.Load(); n > 1 {
			t.Errorf("%d watch streams open, want at most 1", n)
		}
	}
	eventually(t, 5*time.Second, "the stream closed with the last lease", func() bool { return p.streams.Load() == 0 })
	l, err := c.Acquire(ctx, "later", client.AcquireOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a stream for the next lease", func() bool { return p.streams.Load() == 1 })
	if err := admin.Revoke(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	testwait.Receive(t, l.Context().Done(), 5*time.Second)
}
