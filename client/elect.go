package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// ErrNoLeader is the answer of Leader when nobody leads the election.
var ErrNoLeader = errors.New("no leader")

// Leader is who leads an election: the holder of its lease.
type Leader struct {
	// Holder is the leading candidate's name, as it gave it to its campaign.
	Holder string
	// Token is the fencing token of its term; a new term always has a higher one.
	Token int64
	// Metadata is what the leader published, such as its address.
	Metadata map[string]any
}

// Leader returns who leads the election on name, or ErrNoLeader when nobody does (the name
// is free, or was never used).
func (c *Client) Leader(ctx context.Context, name string) (Leader, error) {
	st, err := c.Get(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return Leader{}, fmt.Errorf("leader of %q: %w", name, ErrNoLeader)
	case err != nil:
		return Leader{}, fmt.Errorf("leader of %q: %w", name, err)
	case !st.Held:
		return Leader{}, fmt.Errorf("leader of %q: %w (the last term, token %d, was %s)", name, ErrNoLeader, st.Token, st.End)
	}
	return Leader{Holder: st.Holder, Token: st.Token, Metadata: st.Metadata}, nil
}

// Election is one candidate's part in the election on a name, in the manner of etcd's
// concurrency.Election: the candidate that holds the name's lease leads, for as long as it
// holds it. Campaign, Resign and Proclaim drive it step by step; Run leads whenever it can,
// with callbacks. An Election without a candidate observes: Leader and Observe need none. It
// is safe for concurrent use.
type Election struct {
	c         *Client
	sess      *Session // the session its terms are held under, if any
	name      string
	candidate string
	ttl       time.Duration

	mu       sync.Mutex
	metadata map[string]any // published with the next term; Proclaim replaces it
	term     *Lease         // the lease of the current term, while this candidate leads
}

// ElectionOptions describes a candidate. The zero value observes without campaigning.
type ElectionOptions struct {
	// Candidate names this candidate: the holder of its terms' leases. Empty makes an
	// observer (Campaign is ErrInvalid), except under a Session, where it means the
	// session's holder.
	Candidate string
	// TTL is the lease duration of a term (zero means DefaultTTL): after a leader's process
	// dies, another candidate takes over within about TTL. Under a Session a term lasts as
	// long as the session, whose ttl counts instead.
	TTL time.Duration
	// Metadata is published with each term this candidate wins, such as its address. The
	// Election keeps a copy; Proclaim replaces it.
	Metadata map[string]any
}

// NewElection returns a candidate's part in the election on name, its terms kept alive by
// this client. Nothing is sent until Campaign, Run, Leader or Observe.
func (c *Client) NewElection(name string, o ElectionOptions) *Election {
	return &Election{c: c, name: name, candidate: o.Candidate, ttl: o.TTL, metadata: maps.Clone(o.Metadata)}
}

// NewElection returns a candidate's part in the election on name whose terms are held under
// the session, as etcd's concurrency.NewElection(session, pfx): a term lasts while the
// session does, renewed with the session's other leases, and ends with it. The candidate
// defaults to the session's holder. A term under a session cannot Proclaim (the server
// renews such a lease only through its session, and answers invalid_request).
func (s *Session) NewElection(name string, o ElectionOptions) *Election {
	if o.Candidate == "" {
		o.Candidate = s.holder
	}
	e := s.c.NewElection(name, o)
	e.sess, e.ttl = s, 0
	return e
}

// Name returns the election's name: the lease the candidates compete for.
func (e *Election) Name() string { return e.name }

// Candidate returns the candidate's name, empty for an observer.
func (e *Election) Candidate() string { return e.candidate }

// check returns the configuration error of a campaign, if any, before anything is sent.
func (e *Election) check() error {
	op := fmt.Sprintf("campaign for %q", e.name)
	if e.candidate == "" {
		return fmt.Errorf("%s: %w: the candidate is empty", op, ErrInvalid)
	}
	for _, err := range []error{lease.ValidateName(e.name), lease.ValidateHolder(e.candidate)} {
		if err != nil {
			return invalid(op, err)
		}
	}
	if e.ttl < 0 {
		return fmt.Errorf("%s: %w: ttl %v is negative", op, ErrInvalid, e.ttl)
	}
	return nil
}

// Campaign waits in the server's line until this candidate leads, and returns the lease of
// its term: do the leader's work under its Context (which ends when the term does) and send
// its Token with every write. When this candidate already leads, it returns the current
// term's lease.
//
// Configuration errors come back at once: an invalid name, an empty candidate, and every
// answer of the server that says the request itself is wrong (a ttl outside its bounds, any
// 4xx other than lease_held). Network failures and 5xx answers are retried, with growing
// pauses, until ctx ends.
func (e *Election) Campaign(ctx context.Context) (*Lease, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	term := e.term
	e.mu.Unlock()
	if term != nil && term.Context().Err() == nil {
		return term, nil
	}
	l, err := e.c.acquireUntil(ctx, fmt.Sprintf("campaign for %q", e.name), func(ctx context.Context) (*Lease, error) {
		// Read under the lock Proclaim writes it under: a Proclaim may run meanwhile.
		e.mu.Lock()
		o := AcquireOptions{Holder: e.candidate, TTL: e.ttl, Wait: time.Hour, Metadata: e.metadata}
		e.mu.Unlock()
		if e.sess != nil {
			return e.sess.Acquire(ctx, e.name, o)
		}
		return e.c.Acquire(ctx, e.name, o)
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.term = l
	e.mu.Unlock()
	return l, nil
}

// acquireUntil calls acquire until it grants a lease, ctx ends, or it fails in a way waiting
// cannot mend. A lease held by somebody else is asked again at once (acquire waits in the
// server's line); network failures and 5xx answers are retried after growing pauses. op names
// the operation in errors.
func (c *Client) acquireUntil(ctx context.Context, op string, acquire func(context.Context) (*Lease, error)) (*Lease, error) {
	pause := 100 * time.Millisecond
	for {
		l, err := acquire(ctx)
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		case errors.Is(err, ErrLeaseHeld):
			continue
		case !worthRetrying(err):
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		c.log.WarnContext(ctx, "acquire failed; trying again", "op", op, "err", err)
		if sleep(ctx, c.clock, jitter(pause)) != nil {
			return nil, fmt.Errorf("%s: %w (last error: %w)", op, context.Cause(ctx), err)
		}
		pause = min(pause*2, 5*time.Second)
	}
}

// worthRetrying reports whether a campaign's error may go away by itself: the server could
// not be reached or could not answer, or asked to be asked later.
func worthRetrying(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.retryable() || ae.Status == http.StatusTooManyRequests
	}
	return errors.Is(err, ErrUnavailable)
}

// Resign ends this candidate's term, if it leads: the lease is released, so that another
// candidate leads at once instead of after the ttl. It returns ErrLeaseLost when the term
// had already been lost.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.term
	e.term = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("resign from %q: %w", e.name, err)
	}
	return nil
}

// Proclaim publishes new metadata (such as a new address) for the current term without a new
// election, as etcd's Proclaim: the lease keeps its token, and observers see the change. It
// returns ErrNotLeader when this candidate does not lead, and ErrLeaseLost when its term
// ended meanwhile.
func (e *Election) Proclaim(ctx context.Context, metadata map[string]any) error {
	if metadata == nil {
		metadata = map[string]any{}
	}
	e.mu.Lock()
	l := e.term
	e.mu.Unlock()
	if l == nil {
		return fmt.Errorf("proclaim on %q: %w", e.name, ErrNotLeader)
	}
	if _, err := e.c.renew(ctx, e.name, l.ID(), 0, metadata); err != nil {
		return fmt.Errorf("proclaim on %q: %w", e.name, err)
	}
	e.mu.Lock()
	e.metadata = maps.Clone(metadata)
	e.mu.Unlock()
	return nil
}

// Leader returns who leads this election; see Client.Leader.
func (e *Election) Leader(ctx context.Context) (Leader, error) { return e.c.Leader(ctx, e.name) }

// Observe returns a channel that receives the election's leader whenever a new term starts or
// the leader proclaims new metadata, starting with the current leader if somebody leads, as
// seen on the watch stream. It does
// not report the gaps between terms (Leader answers ErrNoLeader then). A slow reader delays
// later values but never misses the latest term. The channel is closed when ctx ends, when
// the client is closed, or when the stream fails for good (logged). An invalid name is an
// error at once.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := lease.ValidateName(e.name); err != nil {
		return nil, invalid(fmt.Sprintf("observe %q", e.name), err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(e.c.closeCtx, func() { cancel(ErrClosed) })
	ch := make(chan Leader)
	err := e.c.goBackground(func() {
		defer close(ch)
		defer cancel(nil)
		defer stop()
		e.c.observeLeader(ctx, e.name, func(l Leader) {
			select {
			case ch <- l:
			case <-ctx.Done():
			}
		})
	})
	if err != nil {
		stop()
		cancel(nil)
		return nil, fmt.Errorf("observe %q: %w", e.name, err)
	}
	return ch, nil
}

// observeLeader reports the current leader, then every new term seen on the watch stream and
// every new metadata a leader proclaims, until ctx ends or the stream fails for good.
func (c *Client) observeLeader(ctx context.Context, name string, fn func(Leader)) {
	var last Leader
	report := func(l Leader) {
		if l.Token > last.Token || l.Token == last.Token && !reflect.DeepEqual(l.Metadata, last.Metadata) {
			last = l
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
		if e.Name == name && (e.Type == EventAcquired || e.Type == EventRenewed) {
			report(Leader{Holder: e.Holder, Token: e.Token, Metadata: e.Metadata})
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("observing the leader stopped", "name", name, "err", err)
	}
}

// RunOptions tunes Election.Run. Only the callbacks you need must be set.
type RunOptions struct {
	// ReleaseOnCancel releases the lease when ctx ends, so a follower takes over at once
	// instead of after the term's ttl (as client-go's leader election). Without it the term
	// simply runs out; a term under a Session is always released.
	ReleaseOnCancel bool
	// OnStartedLeading runs, in its own goroutine, when this candidate becomes leader, with
	// the lease of its term. ctx ends when the leadership ends (lease lost, context ended); do
	// the leader's work under it and send the lease's Token with every write.
	// OnStoppedLeading is called only after it returns.
	OnStartedLeading func(ctx context.Context, term *Lease)
	// OnStoppedLeading is called when a term of this candidate's ends.
	OnStoppedLeading func()
	// OnNewLeader is called whenever a new term starts, this candidate's included, as observed
	// through the watch stream (and once at the start if somebody leads).
	OnNewLeader func(Leader)
	// OnHandoverRequested is called, in a goroutine of its own, when the server asks this
	// leader to hand over (a cooperative handover, e.g. in a rolling deployment); release term
	// to step down. Without it, the leader steps down at once: the term's context ends, the
	// lease is released (so the candidate the request names, if it waits, leads next) and
	// this candidate campaigns again.
	OnHandoverRequested func(term *Lease, req HandoverRequest)
}

// ErrHandedOver is the cause of a term's context that Run ended because the server asked
// the leader to hand over.
var ErrHandedOver = errors.New("leadership handed over on request")

// Run campaigns for leadership until ctx ends, leading whenever it wins: a loop of Campaign,
// each term run through the callbacks of o. It returns ctx's error when ctx ends, and a
// configuration error (see Campaign) or ErrClosed at once. Only observing needs no Run:
// see Observe.
func (e *Election) Run(ctx context.Context, o RunOptions) error {
	if err := e.check(); err != nil {
		return err
	}
	if o.OnNewLeader != nil {
		leaders, err := e.Observe(ctx)
		if err != nil {
			return err
		}
		observed := make(chan struct{})
		go func() {
			defer close(observed)
			for l := range leaders {
				o.OnNewLeader(l)
			}
		}()
		defer func() { <-observed }()
	}
	for {
		l, err := e.Campaign(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		e.lead(ctx, l, o)
	}
}

// lead runs one term: the callback under a context that ends with the lease or with ctx.
func (e *Election) lead(ctx context.Context, l *Lease, o RunOptions) {
	termCtx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	go func() {
		select {
		case <-l.HandoverRequested():
			if o.OnHandoverRequested == nil {
				cancel(ErrHandedOver)
			} else if h := l.Handover(); h != nil {
				o.OnHandoverRequested(l, *h)
			}
		case <-termCtx.Done():
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if o.OnStartedLeading != nil {
			o.OnStartedLeading(termCtx, l)
		}
	}()
	<-termCtx.Done()
	stop()
	<-done // the work has stopped before anybody hears that the term ended
	// A term under a session would not run out: the session keeps renewing it.
	if ctx.Err() == nil || o.ReleaseOnCancel || e.sess != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := e.Resign(rctx); err != nil && !errors.Is(err, ErrLeaseLost) {
			e.c.log.Warn("release after a term", "name", l.Name(), "err", err)
		}
		rcancel()
	} else {
		// Stop renewing but leave the lease to run out: a follower takes over after the ttl.
		e.mu.Lock()
		e.term = nil
		e.mu.Unlock()
		l.abandon()
	}
	if o.OnStoppedLeading != nil {
		o.OnStoppedLeading()
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
