package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestContextEndsBeforeServerExpiry delays the acquire on its way to the server and its answer
// on the way back, moving both fake clocks in step, and checks the client's deadline falls
// before the server's expiry by the margin plus the delay, and that the context ends there.
func TestContextEndsBeforeServerExpiry(t *testing.T) {
	const ttl, margin = 10 * time.Second, time.Second
	tests := []struct {
		name          string
		there, answer time.Duration // how long the request and the answer travel
	}{
		{"EndsAtMarginBeforeExpiry", 0, 0},
		{"SlowRequestEndsEarlier", 700 * time.Millisecond, 0},
		{"SlowAnswerStillEndsAtMargin", 0, 2 * time.Second},
		{"SlowBothWays", 1500 * time.Millisecond, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvClock := lease.NewFakeClock(base)
			cliClock := newFakeClock(base)
			both := func(d time.Duration) { srvClock.Advance(d); cliClock.Advance(d) }
			p := newProxy(t, newServer(t, onClock(srvClock)))
			p.before = func(r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/acquire") {
					both(tt.there)
				}
			}
			c := newClient(t, p.URL, client.WithClock(cliClock), client.WithSafetyMargin(margin))
			ctx := context.Background()

			l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: ttl, DisableKeepAlive: true})
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			both(tt.answer)

			gap := l.ExpiresAt().Sub(l.Deadline())
			if diff := cmp.Diff(margin+tt.there, gap); diff != "" {
				t.Errorf("server expiry − client deadline (-want +got):\n%s", diff)
			}
			left := l.Deadline().Sub(cliClock.Now())
			both(left - time.Millisecond)
			if isDone(l.Context()) {
				t.Fatalf("context ended 1 ms before its deadline: %v", context.Cause(l.Context()))
			}
			both(time.Millisecond)
			waitDone(t, l.Context(), 2*time.Second)
			if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) {
				t.Errorf("Cause = %v, want ErrLeaseLost", cause)
			}
			st, err := c.Get(ctx, "job")
			if err != nil {
				t.Fatalf("Get = %v", err)
			}
			if !st.Held || !st.ExpiresAt.After(srvClock.Now()) {
				t.Errorf("when the client stopped, server state = held %v expires %v at %v; want held and later", st.Held, st.ExpiresAt, srvClock.Now())
			}
		})
	}
}

// TestRenewalMovesDeadlineFromSendTime checks the deadline moves to renew-sent + ttl − margin.
func TestRenewalMovesDeadlineFromSendTime(t *testing.T) {
	const ttl, margin = 9 * time.Second, 900 * time.Millisecond
	srvClock := lease.NewFakeClock(base)
	cliClock := newFakeClock(base)
	c := newClient(t, newServer(t, onClock(srvClock)), client.WithClock(cliClock), client.WithSafetyMargin(margin))
	l, err := c.Acquire(context.Background(), "job", client.AcquireOptions{Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	eventually(t, 2*time.Second, "the keepalive to wait", func() bool { return cliClock.pending() >= 2 })
	srvClock.Advance(3 * time.Second)
	cliClock.Advance(3 * time.Second) // the renew fraction, 1/3 of 9 s
	want := base.Add(3*time.Second + ttl - margin)
	eventually(t, 2*time.Second, "the renewal", func() bool { return l.Deadline().Equal(want) })
	if diff := cmp.Diff(base.Add(3*time.Second+ttl), l.ExpiresAt()); diff != "" {
		t.Errorf("ExpiresAt after renewal (-want +got):\n%s", diff)
	}
}

// TestRefusedRenewalEndsContextAtOnce ends the lease on the server and checks the context ends
// at the next renewal, long before its deadline, and that Release then reports the loss.
func TestRefusedRenewalEndsContextAtOnce(t *testing.T) {
	const ttl = 9 * time.Second
	tests := []struct {
		name string
		end  func(t *testing.T, c *client.Client, srv *lease.FakeClock)
	}{
		{"ErrLostWhenRevoked", func(t *testing.T, c *client.Client, _ *lease.FakeClock) {
			if err := c.Revoke(context.Background(), "job"); err != nil {
				t.Fatalf("Revoke = %v", err)
			}
		}},
		{"ErrLostWhenSuperseded", func(t *testing.T, c *client.Client, srv *lease.FakeClock) {
			srv.Advance(ttl + time.Second) // only the server's clock: as if the client's ran slow
			if _, err := c.Acquire(context.Background(), "job", client.AcquireOptions{Holder: "b", TTL: ttl, DisableKeepAlive: true}); err != nil {
				t.Fatalf("Acquire by b = %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvClock := lease.NewFakeClock(base)
			cliClock := newFakeClock(base)
			c := newClient(t, newServer(t, onClock(srvClock)), client.WithClock(cliClock))
			ctx := context.Background()
			// Without the watch, which would notice the end before any renewal does.
			l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: ttl, DisableWatch: true})
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			tt.end(t, c, srvClock)
			if isDone(l.Context()) {
				t.Fatal("context ended before any renewal was refused")
			}
			eventually(t, 2*time.Second, "the keepalive to wait", func() bool { return cliClock.pending() >= 2 })
			cliClock.Advance(ttl / 3)
			waitDone(t, l.Context(), 3*time.Second)
			if !cliClock.Now().Before(l.Deadline()) {
				t.Errorf("context ended at %v, not before its deadline %v", cliClock.Now(), l.Deadline())
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) {
				t.Errorf("Cause = %v, want ErrLeaseLost", cause)
			}
			for i := range 2 {
				if err := l.Release(ctx); !errors.Is(err, client.ErrLeaseLost) {
					t.Errorf("Release #%d = %v, want ErrLeaseLost", i+1, err)
				}
			}
		})
	}
}

// TestOutageLongerThanTTLEndsContext cuts the network between client and server (real time,
// ttl 1 s) and checks the context ends while the server still holds the lease, that renewals
// were retried meanwhile, and that Release after the server's expiry reports the loss.
func TestOutageLongerThanTTLEndsContext(t *testing.T) {
	const ttl, margin = time.Second, 200 * time.Millisecond
	srvURL := newServer(t)
	p := newProxy(t, srvURL)
	c := newClient(t, p.URL, client.WithSafetyMargin(margin))
	direct := newClient(t, srvURL)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	eventually(t, 2*time.Second, "a first renewal", func() bool { return p.succeeded("/v1/leases/job/renew") >= 1 })

	cut := time.Now()
	p.failing.Store(true)
	before := len(p.requests("/v1/leases/job/renew"))
	waitDone(t, l.Context(), 2*time.Second)
	ended := time.Since(cut)
	st, err := direct.Get(ctx, "job")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if !st.Held {
		t.Errorf("the server no longer held the lease when the client stopped (%v after the cut)", ended)
	}
	if ended > ttl-margin+100*time.Millisecond {
		t.Errorf("context ended %v after the cut, want at most ttl − margin (%v) + slack", ended, ttl-margin)
	}
	if tried := len(p.requests("/v1/leases/job/renew")) - before; tried < 2 {
		t.Errorf("renewals tried during the outage = %d, want retries (≥ 2)", tried)
	}
	t.Logf("context ended %v after the cut; server expiry %v after that", ended, time.Until(st.ExpiresAt).Round(time.Millisecond))

	time.Sleep(time.Until(st.ExpiresAt) + 50*time.Millisecond)
	p.failing.Store(false)
	if err := l.Release(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Errorf("Release after the server expired the lease = %v, want ErrLeaseLost", err)
	}
}

// TestAcquireRetryReusesIdempotencyKey loses the answer to a granted acquire and checks the
// retry returns that same grant (one acquired event, one token), and that the deadline counts
// from the first attempt's send time.
func TestAcquireRetryReusesIdempotencyKey(t *testing.T) {
	const ttl, margin = 10 * time.Second, time.Second
	srvClock := lease.NewFakeClock(base)
	cliClock := newFakeClock(base)
	srvURL := newServer(t, onClock(srvClock))
	p := newProxy(t, srvURL)
	dropped := false
	p.dropAnswer = func(r *http.Request) bool {
		if dropped || !strings.HasSuffix(r.URL.Path, "/acquire") {
			return false
		}
		dropped = true
		cliClock.Advance(1500 * time.Millisecond) // the lost answer took a while to time out
		return true
	}
	c := newClient(t, p.URL, client.WithClock(cliClock), client.WithSafetyMargin(margin))
	done := make(chan struct{})
	go func() { // the retry sleeps by the fake clock
		defer close(done)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				cliClock.Advance(100 * time.Millisecond)
			}
		}
	}()
	l, err := c.Acquire(context.Background(), "job", client.AcquireOptions{Holder: "a", TTL: ttl, DisableKeepAlive: true})
	done <- struct{}{}
	<-done
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	keys := p.requests("/v1/leases/job/acquire")
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("Idempotency-Keys sent = %q, want two equal non-empty keys", keys)
	}
	st, err := newClient(t, srvURL).Get(context.Background(), "job")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if diff := cmp.Diff([]any{true, "a", st.Token}, []any{st.Held, st.Holder, l.Token()}); diff != "" {
		t.Errorf("lease after retry (-server +client):\n%s", diff)
	}
	if diff := cmp.Diff(base.Add(ttl-margin), l.Deadline()); diff != "" {
		t.Errorf("Deadline, from the first send (-want +got):\n%s", diff)
	}
}

// TestWaitPollsWhenServerHasNoLine waits for a lease on a server without a waiting line: the
// client falls back to polling with Retry-After, and gets the lease after the first holder's
// context ended.
func TestWaitPollsWhenServerHasNoLine(t *testing.T) {
	c := newClient(t, newServer(t, withoutLine()), client.WithSafetyMargin(100*time.Millisecond))
	ctx := context.Background()
	a, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: time.Second, DisableKeepAlive: true})
	if err != nil {
		t.Fatalf("Acquire a = %v", err)
	}
	b, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "b", TTL: time.Second, Wait: 3 * time.Second})
	if err != nil {
		t.Fatalf("Acquire b with wait = %v", err)
	}
	t.Cleanup(func() { b.Release(ctx) })
	if !isDone(a.Context()) {
		t.Error("b was granted while a's context was still live")
	}
	if b.Token() <= a.Token() {
		t.Errorf("b's token %d ≤ a's token %d", b.Token(), a.Token())
	}
	if _, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "c", TTL: time.Second, Wait: 200 * time.Millisecond}); !errors.Is(err, client.ErrLeaseHeld) {
		t.Errorf("Acquire c with a short wait = %v, want ErrLeaseHeld", err)
	}
}

// TestDo runs work under a lease.
func TestDo(t *testing.T) {
	tests := []struct {
		name    string
		fn      func(c *client.Client) func(ctx context.Context, token int64) error
		wantErr error
		wantEnd string
	}{
		{"OKReleases", func(*client.Client) func(context.Context, int64) error {
			return func(context.Context, int64) error { return nil }
		}, nil, "released"},
		{"ErrLostWhenRevokedMidway", func(c *client.Client) func(context.Context, int64) error {
			return func(ctx context.Context, _ int64) error {
				if err := c.Revoke(context.Background(), "job"); err != nil {
					return err
				}
				<-ctx.Done() // the next renewal is refused
				return context.Cause(ctx)
			}
		}, client.ErrLeaseLost, "revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, newServer(t))
			var got int64
			fn := tt.fn(c)
			err := client.Do(context.Background(), c, "job", client.AcquireOptions{Holder: "a", TTL: time.Second},
				func(ctx context.Context, token int64) error { got = token; return fn(ctx, token) })
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Do = %v, want %v", err, tt.wantErr)
			}
			st, gerr := c.Get(context.Background(), "job")
			if gerr != nil {
				t.Fatalf("Get = %v", gerr)
			}
			if diff := cmp.Diff([]any{false, got, tt.wantEnd}, []any{st.Held, st.Token, st.End}); diff != "" {
				t.Errorf("state after Do (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReleaseAfterDeadlineGivesLeaseBack lets the context end at its deadline while a renewal
// hangs in the network, and checks Release still releases on the server (which holds the lease
// until its own expiry) instead of mistaking the cut-short renewal for a refusal.
func TestReleaseAfterDeadlineGivesLeaseBack(t *testing.T) {
	const ttl, margin = 9 * time.Second, time.Second
	srvClock := lease.NewFakeClock(base)
	cliClock := newFakeClock(base)
	srvURL := newServer(t, onClock(srvClock))
	p := newProxy(t, srvURL)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	p.before = func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/renew") {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}
	c := newClient(t, p.URL, client.WithClock(cliClock), client.WithSafetyMargin(margin))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "job", client.AcquireOptions{Holder: "a", TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	eventually(t, 2*time.Second, "the keepalive to wait", func() bool { return cliClock.pending() >= 2 })
	cliClock.Advance(ttl / 3)
	eventually(t, 2*time.Second, "a renewal to hang", func() bool { return len(p.requests("/v1/leases/job/renew")) == 1 })
	cliClock.Advance(ttl - margin - ttl/3)
	waitDone(t, l.Context(), 2*time.Second)
	if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) {
		t.Errorf("Cause = %v, want ErrLeaseLost (deadline)", cause)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release while the server still holds the lease = %v, want nil", err)
	}
	st, err := newClient(t, srvURL).Get(ctx, "job")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if st.Held || st.End != "released" {
		t.Errorf("server state after Release: held %v end %q, want released", st.Held, st.End)
	}
}

// TestRevokeNoticedFromWatch revokes a 30 s lease whose client clock never moves, so no
// renewal can happen, and checks the lease context ends within two seconds all the same:
// the lease follows its name on the watch stream. Without a stream (a server that has none)
// renewals alone still end it.
func TestRevokeNoticedFromWatch(t *testing.T) {
	t.Run("ErrLostSeenOnStream", func(t *testing.T) {
		c := newClient(t, newServer(t), client.WithClock(newFakeClock(base)))
		l, err := c.Acquire(context.Background(), "job", client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		start := time.Now()
		if err := newClient(t, c.BaseURL()).Revoke(context.Background(), "job"); err != nil {
			t.Fatalf("Revoke = %v", err)
		}
		waitDone(t, l.Context(), 2*time.Second)
		t.Logf("lease context ended %v after the revoke", time.Since(start).Round(time.Millisecond))
		if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) || !strings.Contains(cause.Error(), "revoked") {
			t.Errorf("Cause = %v, want ErrLeaseLost naming the revoke", cause)
		}
		if err := l.Release(context.Background()); !errors.Is(err, client.ErrLeaseLost) {
			t.Errorf("Release = %v, want ErrLeaseLost", err)
		}
	})
	t.Run("ErrLostByRenewalWithoutStream", func(t *testing.T) {
		cliClock := newFakeClock(base)
		c := newClient(t, newServer(t, withoutLine()), client.WithClock(cliClock))
		l, err := c.Acquire(context.Background(), "job", client.AcquireOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if err := c.Revoke(context.Background(), "job"); err != nil {
			t.Fatalf("Revoke = %v", err)
		}
		eventually(t, 2*time.Second, "the keepalive to wait", func() bool { return cliClock.pending() >= 2 })
		cliClock.Advance(10 * time.Second)
		waitDone(t, l.Context(), 2*time.Second)
		if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrLeaseLost) {
			t.Errorf("Cause = %v, want ErrLeaseLost", cause)
		}
	})
}
