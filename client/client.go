package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/fence"
	"github.com/leasekeeper/leasekeeper/lease"
)

// Clock is the client's source of time. Deadlines are measured with it, so it must be
// monotonic: the default uses time.Now, whose readings carry the monotonic clock, and
// time.AfterFunc. Tests inject a fake.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not happened yet, and reports whether it did so.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// DefaultTTL is the lease duration of an acquire that asks for none.
const DefaultTTL = 15 * time.Second

// Client talks to one leasekeeper server. It is safe for concurrent use. Close it when done:
// it stops the background work of the leases it holds.
type Client struct {
	api           *wire.ClientWithResponses
	baseURL       string
	clock         Clock
	log           *slog.Logger
	renewFraction float64
	margin        time.Duration // 0 means ttl/10
	attempts      int
	httpClient    *http.Client
	userAgent     string // sent with every request; rejections record it
	apiKey        string
	tlsConfig     *tls.Config
	rootCAs       *x509.CertPool
	ownTransport  *http.Transport // the transport the TLS options made, closed by Close
	holder        string          // the default holder: host and pid

	// maxWait is the longest wait_ms asked of the server at once: the default bound of
	// servers, lowered when a server refuses a wait as above its own bound.
	maxWait atomic.Int64

	// closeCtx ends when Close is called; every background goroutine of the client ends
	// with it and is counted in bg.
	closeCtx context.Context
	closeFn  context.CancelCauseFunc
	mu       sync.Mutex
	closed   bool
	bg       sync.WaitGroup

	// followers is the watch stream the kept-alive leases share.
	followers followers
}

// New returns a client of the server at baseURL, such as http://127.0.0.1:8080.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q must be http(s)://host[:port]", baseURL)
	}
	c := &Client{
		baseURL:       strings.TrimRight(baseURL, "/"),
		clock:         realClock{},
		log:           slog.New(slog.DiscardHandler),
		renewFraction: 1.0 / 3,
		attempts:      4,
		httpClient:    &http.Client{},
		userAgent:     "leasekeeper-client",
		holder:        defaultHolder(),
	}
	c.maxWait.Store(int64(lease.DefaultLimits().MaxWait))
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	if err := c.applyTLS(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.api, err = wire.NewClientWithResponses(c.baseURL, wire.WithHTTPClient(c.httpClient),
		wire.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
			// The caller's trace continues on the server (W3C traceparent); without a span in
			// ctx nothing is sent.
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
			if r.Header.Get("User-Agent") == "" {
				r.Header.Set("User-Agent", c.userAgent)
			}
			if c.apiKey != "" && r.Header.Get("Authorization") == "" {
				r.Header.Set("Authorization", "Bearer "+c.apiKey)
			}
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.closeCtx, c.closeFn = context.WithCancelCause(context.Background())
	c.followers.c = c
	return c, nil
}

// defaultHolder names this process for humans: "host (pid N)".
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s (pid %d)", host, os.Getpid())
}

// Close stops the client's background work and waits for it to end: the renewals and watch
// streams of every lease acquired through it, and every Observe. The context of each lease
// still held ends with the cause ErrClosed.
//
// Close releases nothing: work under a lease may still be running when its context ends,
// and releasing then would let another holder in beside it. Call Release once that work has
// stopped (Release and the other one-off requests still work after Close), or let the
// leases run out on the server after their ttl. Acquire, Campaign and Observe return
// ErrClosed afterwards. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.closeFn(ErrClosed)
	c.bg.Wait()
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
	return nil
}

// goBackground runs f in a goroutine that Close waits for, unless the client is closed.
func (c *Client) goBackground(f func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
	return nil
}

// isClosed reports whether Close has been called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Reporter returns a fence.Reporter that reports rejections to this client's server with its
// HTTP client, User-Agent and API key.
func (c *Client) Reporter() *fence.Reporter {
	return &fence.Reporter{BaseURL: c.baseURL, Client: c.httpClient, UserAgent: c.userAgent, APIKey: c.apiKey}
}

// BaseURL returns the server URL the client talks to.
func (c *Client) BaseURL() string { return c.baseURL }

// marginFor returns the safety margin of a lease with this ttl.
func (c *Client) marginFor(ttl time.Duration) time.Duration {
	if c.margin > 0 {
		return c.margin
	}
	return ttl / 10
}

// Grant is a lease as its holder sees it, from an acquire or a renewal.
type Grant struct {
	Name    string
	Holder  string
	LeaseID string // only from acquire
	Token   int64
	TTL     time.Duration
	// LockDelay is how long the name stays unavailable after this lease expires.
	LockDelay  time.Duration
	AcquiredAt time.Time
	RenewedAt  time.Time
	// ExpiresAt is the server's expiry, by the server's clock.
	ExpiresAt time.Time
	Metadata  map[string]any
	// ServerEpoch names the start of the server process that answered (empty from a server
	// that does not say): a change means the server restarted (or, with PostgreSQL, that
	// another replica answered).
	ServerEpoch string
	// Limit and Slot are, for a slot of a semaphore, its limit and index; Slot is also a
	// shared lease's slot.
	Limit, Slot int
	// Shared is set for a shared (read) lease.
	Shared bool
	// ExtendedByRestart is how much the server's restarts added to this grant's expiry beyond
	// what its holder was last told, in total: a restarted server treats a lease as held until
	// at least the restart plus its ttl, so it may have kept the name from others longer than
	// the holder's own reckoning did.
	ExtendedByRestart time.Duration
	// Handover is the request that the holder let the lease go, in a renewal's answer; nil
	// when none was made.
	Handover *HandoverRequest
}

// HandoverRequest is a request that the holder of a lease let it go (POST
// /v1/leases/{name}/handover): nothing is forced, the holder decides when to release. When To
// names a holder waiting in line, the server grants it first on release.
type HandoverRequest struct {
	Name   string
	Token  int64  // the grant asked to let go
	To     string // the holder to grant next; empty for whoever waits first
	Reason string
	By     string    // who asked, as "label (key id)"; empty from the watch stream
	At     time.Time // when, by the server's clock
}

func grantOf(l *wire.Lease) Grant {
	g := Grant{Name: l.Name, Holder: l.Holder, LeaseID: deref(l.LeaseId), Token: l.Token,
		TTL: time.Duration(l.TtlMs) * time.Millisecond, LockDelay: time.Duration(l.LockDelayMs) * time.Millisecond,
		AcquiredAt: l.AcquiredAt.Time, RenewedAt: l.RenewedAt.Time, ExpiresAt: l.ExpiresAt.Time,
		Limit: deref(l.Limit), Slot: deref(l.Slot), ServerEpoch: deref(l.ServerEpoch), ExtendedByRestart: time.Duration(deref(l.ExtendedByRestartMs)) * time.Millisecond,
		Shared: deref(l.Mode) == wire.LeaseModeShared}
	if h := l.HandoverRequested; h != nil {
		g.Handover = handoverOf(h)
	}
	if l.Metadata != nil {
		g.Metadata = *l.Metadata
	}
	return g
}

// State is a name's state as anybody may read it (never its lease_id). For a free name it
// keeps the last holder and token.
type State struct {
	Name       string
	Held       bool
	Holder     string
	Token      int64
	TTL        time.Duration
	LockDelay  time.Duration
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	// EndedAt and End say when and how (released, expired, revoked) the last lease ended.
	EndedAt time.Time
	End     string
	// AvailableAt is when the name can be granted again.
	AvailableAt time.Time
	Metadata    map[string]any
	// Waiters is how many acquires wait in line on the server.
	Waiters int
	// Limit is a semaphore's limit (0 for a plain lease); Held then means every slot is held,
	// and Slots holds each slot's state (named "name#i").
	Limit int
	Slots []State
	// Shared is set for a name held (or last held) by shared leases: Held then means any is,
	// and Holders holds each shared lease held now (named "name#i").
	Shared  bool
	Holders []State
}

func stateOf(s *wire.LeaseState) State {
	st := State{Name: s.Name, Held: s.Held, Holder: s.Holder, Token: s.Token,
		TTL: time.Duration(s.TtlMs) * time.Millisecond, LockDelay: time.Duration(s.LockDelayMs) * time.Millisecond,
		AcquiredAt: deref(s.AcquiredAt).Time, RenewedAt: deref(s.RenewedAt).Time, ExpiresAt: deref(s.ExpiresAt).Time,
		EndedAt: deref(s.EndedAt).Time, End: string(deref(s.End)), AvailableAt: deref(s.AvailableAt).Time, Waiters: s.Waiters}
	if s.Metadata != nil {
		st.Metadata = *s.Metadata
	}
	st.Limit = deref(s.Limit)
	if s.Slots != nil {
		for _, sl := range *s.Slots {
			st.Slots = append(st.Slots, stateOf(&sl))
		}
	}
	st.Shared = deref(s.Mode) == wire.LeaseStateModeShared
	if s.Holders != nil {
		for _, h := range *s.Holders {
			st.Holders = append(st.Holders, stateOf(&h))
		}
	}
	return st
}

// Get returns the state of a name; a name never used is ErrNotFound.
func (c *Client) Get(ctx context.Context, name string) (State, error) {
	resp, err := c.api.GetLeaseWithResponse(ctx, name)
	if err != nil {
		return State{}, unanswered(ctx, fmt.Sprintf("get %q", name), err)
	}
	if resp.JSON200 == nil {
		return State{}, fmt.Errorf("get %q: %w", name, problemOf(resp.HTTPResponse, resp.Body))
	}
	return stateOf(resp.JSON200), nil
}

// ListOptions filters and pages List.
type ListOptions struct {
	// Prefix keeps names that start with it.
	Prefix string
	// State is "held", "free", or empty for both.
	State string
	// Limit is the page size (server default 100, at most 1000).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// Page is one page of List.
type Page struct {
	Leases []State
	// NextCursor asks for the next page; empty at the end.
	NextCursor string
}

// List returns one page of lease states, ordered by name.
func (c *Client) List(ctx context.Context, o ListOptions) (Page, error) {
	p := &wire.ListLeasesParams{}
	if o.Prefix != "" {
		p.Prefix = &o.Prefix
	}
	if o.State != "" {
		s := wire.ListLeasesParamsState(o.State)
		p.State = &s
	}
	if o.Limit > 0 {
		p.Limit = &o.Limit
	}
	if o.Cursor != "" {
		p.Cursor = &o.Cursor
	}
	resp, err := c.api.ListLeasesWithResponse(ctx, p)
	if err != nil {
		return Page{}, unanswered(ctx, "list leases", err)
	}
	if resp.JSON200 == nil {
		return Page{}, fmt.Errorf("list leases: %w", problemOf(resp.HTTPResponse, resp.Body))
	}
	out := Page{NextCursor: resp.JSON200.NextCursor, Leases: make([]State, 0, len(resp.JSON200.Leases))}
	for i := range resp.JSON200.Leases {
		out.Leases = append(out.Leases, stateOf(&resp.JSON200.Leases[i]))
	}
	return out, nil
}

// Renew extends the lease with this lease_id once, without any client-side bookkeeping (a
// held *Lease renews itself). ttl 0 keeps the lease's ttl. A lease that ended is ErrLeaseLost.
func (c *Client) Renew(ctx context.Context, name, leaseID string, ttl time.Duration) (Grant, error) {
	return c.renew(ctx, name, leaseID, ttl, nil)
}

// renew is Renew that, with metadata, also replaces the lease's metadata.
func (c *Client) renew(ctx context.Context, name, leaseID string, ttl time.Duration, metadata map[string]any) (Grant, error) {
	body := wire.RenewRequest{LeaseId: leaseID}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		body.TtlMs = &ms
	}
	if metadata != nil {
		md := wire.Metadata(metadata)
		body.Metadata = &md
	}
	resp, err := c.api.RenewLeaseWithResponse(ctx, name, body)
	if err != nil {
		return Grant{}, unanswered(ctx, fmt.Sprintf("renew %q", name), err)
	}
	if resp.JSON200 == nil {
		return Grant{}, fmt.Errorf("renew %q: %w", name, problemOf(resp.HTTPResponse, resp.Body))
	}
	return grantOf(resp.JSON200), nil
}

// Release ends the lease with this lease_id. Repeating it succeeds; a lease that had already
// expired or been revoked is ErrLeaseLost.
func (c *Client) Release(ctx context.Context, name, leaseID string) error {
	resp, err := c.api.ReleaseLeaseWithResponse(ctx, name, wire.ReleaseRequest{LeaseId: leaseID})
	if err != nil {
		return unanswered(ctx, fmt.Sprintf("release %q", name), err)
	}
	if resp.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("release %q: %w", name, problemOf(resp.HTTPResponse, resp.Body))
	}
	return nil
}

// Revoke ends whatever lease is current on name (an administrator's action); its holder's
// next renewal is refused. A free name succeeds.
func (c *Client) Revoke(ctx context.Context, name string) error {
	return c.revoke(ctx, name, nil)
}

// RevokeToken ends the lease on name only if its fencing token is token: a revoke aimed at
// one holder never ends a successor's. It matches ErrLeaseLost when the name has moved on.
func (c *Client) RevokeToken(ctx context.Context, name string, token int64) error {
	return c.revoke(ctx, name, &token)
}

func (c *Client) revoke(ctx context.Context, name string, token *int64) error {
	resp, err := c.api.RevokeLeaseWithResponse(ctx, name, &wire.RevokeLeaseParams{Token: token})
	if err != nil {
		return unanswered(ctx, fmt.Sprintf("revoke %q", name), err)
	}
	if resp.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("revoke %q: %w", name, problemOf(resp.HTTPResponse, resp.Body))
	}
	return nil
}

// newKey returns a fresh Idempotency-Key.
func newKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "lkc-" + hex.EncodeToString(b)
}

// jitter returns d scaled by a random factor in [0.5, 1.5).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + mrand.Float64()))
}

// sleep waits d by clk, or until ctx ends.
func sleep(ctx context.Context, clk Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(ch) })
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryable reports whether an error of a request is worth repeating: a network failure or
// a server that could not answer, but not the caller's own context ending.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.retryable()
	}
	return true
}

// unanswered is the error of op when its request got no answer: ErrUnavailable, unless the
// caller's own context ended.
func unanswered(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, unreachable(err))
}

// RequestHandover asks the current holder of name to let the lease go (a writer of the name or
// an admin may): its renewals and the watch stream tell it, and when to names a holder
// waiting in line, that one is granted first once the lease is released. Nothing is forced.
// A free name is an *APIError with code not_held; one never used matches ErrNotFound.
func (c *Client) RequestHandover(ctx context.Context, name, to, reason string) (HandoverRequest, error) {
	op := fmt.Sprintf("request handover of %q", name)
	body := wire.HandoverRequest{}
	if to != "" {
		body.To = &to
	}
	if reason != "" {
		body.Reason = &reason
	}
	resp, err := c.api.RequestHandoverWithResponse(ctx, name, body)
	if err != nil {
		return HandoverRequest{}, unanswered(ctx, op, err)
	}
	if resp.JSON202 == nil {
		return HandoverRequest{}, fmt.Errorf("%s: %w", op, problemOf(resp.HTTPResponse, resp.Body))
	}
	return *handoverOf(resp.JSON202), nil
}

func handoverOf(h *wire.Handover) *HandoverRequest {
	return &HandoverRequest{Name: h.Name, Token: h.Token, To: deref(h.To), Reason: deref(h.Reason), By: deref(h.RequestedBy),
		At: h.RequestedAt.Time}
}
