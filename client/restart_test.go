package client_test

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/logtest"
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestRestartVisible restarts the server on the same database while a lease is held: the
// holder's next renewal carries a new server_epoch and what the restart added to the expiry
// (it restarted 8 s into a 10 s lease, so the expiry moved 8 s later), and the client logs
// both.
func TestRestartVisible(t *testing.T) {
	dir := t.TempDir()
	srvClock := lease.NewFakeClock(base)
	o := serverOptions{clock: srvClock, limits: lease.DefaultLimits()}
	first, key, stop, err := startServer(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() })
	// One address for the client whichever process serves.
	var target atomic.Pointer[url.URL]
	u, _ := url.Parse(first)
	target.Store(u)
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }})
	t.Cleanup(front.Close)
	remember(t, front.URL, key)
	var logs logtest.Sink
	c := newClient(t, front.URL, client.WithClock(newFakeClock(base)), client.WithLogger(logs.Logger()))
	ctx := context.Background()

	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: 10 * time.Second, DisableKeepAlive: true})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	before := l.ServerEpoch()
	if !strings.HasPrefix(before, lease.EpochPrefix) || l.ExtendedByRestart() != 0 {
		t.Fatalf("after Acquire: ServerEpoch() = %q, ExtendedByRestart() = %v; want an epoch and 0", before, l.ExtendedByRestart())
	}

	srvClock.Advance(8 * time.Second)
	stop()
	second, _, stop2, err := startServer(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	stop = stop2
	u, _ = url.Parse(second)
	target.Store(u)

	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew after the restart = %v", err)
	}
	if got := l.ServerEpoch(); got == before || !strings.HasPrefix(got, lease.EpochPrefix) {
		t.Errorf("ServerEpoch() after the restart = %q, want a new epoch (was %q)", got, before)
	}
	if got := l.ExtendedByRestart(); got != 8*time.Second {
		t.Errorf("ExtendedByRestart() = %v, want 8s", got)
	}
	if rs := logs.Records(t, "INFO"); len(rs) != 1 || rs[0]["previous_server_epoch"] != before {
		t.Errorf("INFO records = %v, want one naming the server's restart", rs)
	}
	if rs := logs.Records(t, "WARN"); len(rs) != 1 || rs[0]["extended_by_restart"] != float64(8*time.Second) {
		t.Errorf("WARN records = %v, want one saying the restart stretched the lease by 8s", rs)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
}
