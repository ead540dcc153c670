package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Leader is who leads an election, as followers observe it.
type Leader struct {
	// Holder is the leading candidate's name, as it gave it to Elect.
	Holder string
	// Token is the fencing token of its term; a new term always has a higher one.
	Token int64
	// Metadata is what the leader published, such as its address.
	Metadata map[string]any
}

// ElectionConfig tunes Elect. Only the callbacks you need must be set.
type ElectionConfig struct {
	// TTL is the lease duration of a term (default 15 s): after a leader's process dies, a
	// follower takes over within about TTL.
	TTL time.Duration
	// ReleaseOnCancel releases the lease when ctx ends, so a follower takes over at once
	// instead of after TTL (as client-go's leader election). Without it the term simply
	// runs out.
	ReleaseOnCancel bool
	// OnStartedLeading runs, in its own goroutine, when this candidate becomes leader. ctx
	// ends when the leadership ends (lease lost, context ended); do the leader's work under it
	// and send token with every write. OnStoppedLeading is called only after it returns.
	OnStartedLeading func(ctx context.Context, token int64)
	// OnStoppedLeading is called when a term of this candidate's ends.
	OnStoppedLeading func()
	// OnNewLeader is called whenever a new term starts, this candidate's included, as observed
	// through the watch stream (and once at the start if somebody leads).
	OnNewLeader func(Leader)
}

// Elect campaigns for leadership of name as candidate, publishing metadata (such as its
// address) with its lease, until ctx ends. It waits in the server's line for the lease, leads
// while it holds it (the lease renews itself; its context ends before the server's expiry),
// and campaigns again after a term ends. It returns ctx's error.
func (c *Client) Elect(ctx context.Context, name, candidate string, metadata map[string]any, cfg ElectionConfig) error {
	if cfg.TTL == 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.OnNewLeader != nil {
		observed := make(chan struct{})
		go func() {
			defer close(observed)
			c.observeLeader(ctx, name, cfg.OnNewLeader)
		}()
		defer func() { <-observed }()
	}
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Wait in line in chunks well inside the server's bound on waits.
		l, err := c.Acquire(ctx, name, AcquireOptions{Holder: candidate, TTL: cfg.TTL, Wait: time.Minute, Metadata: metadata})
		if err != nil {
			if errors.Is(err, ErrLeaseHeld) || ctx.Err() != nil {
				continue
			}
			c.log.WarnContext(ctx, "campaign failed; trying again", "name", name, "err", err)
			if sleep(ctx, c.clock, jitter(pause)) != nil {
				break
			}
			pause = min(pause*2, cfg.TTL)
			continue
		}
		pause = 100 * time.Millisecond
		c.lead(ctx, l, cfg)
	}
	return ctx.Err()
}

// lead runs one term: the callback under a context that ends with the lease or with ctx.
func (c *Client) lead(ctx context.Context, l *Lease, cfg ElectionConfig) {
	termCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.OnStartedLeading != nil {
			cfg.OnStartedLeading(termCtx, l.Token())
		}
	}()
	<-termCtx.Done()
	stop()
	<-done // the work has stopped before anybody hears that the term ended
	if ctx.Err() == nil || cfg.ReleaseOnCancel {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := l.Release(rctx); err != nil && !errors.Is(err, ErrLeaseLost) {
			c.log.Warn("release after a term", "name", l.Name(), "err", err)
		}
		rcancel()
	} else {
		// Stop renewing but leave the lease to run out: a follower takes over after the ttl.
		l.abandon()
	}
	if cfg.OnStoppedLeading != nil {
		cfg.OnStoppedLeading()
	}
}

// observeLeader reports the current leader, then every new term seen on the watch stream.
func (c *Client) observeLeader(ctx context.Context, name string, fn func(Leader)) {
	var last int64
	report := func(l Leader) {
		if l.Token > last {
			last = l.Token
			fn(l)
		}
	}
	// The state is read once the stream is open, so no term starts unseen in between.
	current := func() error {
		if st, err := c.Get(ctx, name); err == nil && st.Held {
			report(Leader{Holder: st.Holder, Token: st.Token, Metadata: st.Metadata})
		}
		return nil
	}
	err := c.Follow(ctx, name, current, func(e Event) error {
		if e.Name == name && e.Type == "acquired" {
			report(Leader{Holder: e.Holder, Token: e.Token, Metadata: e.Metadata})
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("observing the leader stopped", "name", name, "err", fmt.Sprint(err))
	}
}

// errAbandoned ends the context of a lease left to run out.
var errAbandoned = errors.New("lease abandoned: left to run out on the server")

// abandon stops using the lease without releasing it: renewals stop, the context ends, and
// the lease runs out on the server by itself.
func (l *Lease) abandon() {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.relDone {
		return
	}
	l.end(errAbandoned)
	l.bg.Wait()
	l.stopClose()
	l.relDone = true
}
