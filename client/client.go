package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
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

// Client talks to one leasekeeper server. It is safe for concurrent use.
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

	// noServerWait is set once the server refused wait_ms and accepted the same acquire
	// without it: it has no waiting line, so waits happen here.
	noServerWait atomic.Bool
}

// Option configures a Client.
type Option func(*Client) error

// WithUserAgent sets the User-Agent of every request, e.g. "billing-worker/1.4". The server
// records it with rejected stale writes, so a good one tells you who wrote late.
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		if ua == "" {
			return errors.New("WithUserAgent: empty")
		}
		c.userAgent = ua
		return nil
	}
}

// WithHTTPClient sets the HTTP client (timeouts, transport, proxies). The default is an
// http.Client without an overall timeout: requests are bounded by their contexts.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("WithHTTPClient: nil client")
		}
		c.httpClient = hc
		return nil
	}
}

// WithClock sets the clock that measures lease deadlines and paces renewals (tests).
func WithClock(clk Clock) Option {
	return func(c *Client) error {
		if clk == nil {
			return errors.New("WithClock: nil clock")
		}
		c.clock = clk
		return nil
	}
}

// WithLogger sets the logger for renewal failures and retries; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithRenewFraction sets when a lease is renewed, as a fraction of its ttl after the last
// successful renewal was sent (default 1/3, leaving two more tries before the deadline).
func WithRenewFraction(f float64) Option {
	return func(c *Client) error {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("WithRenewFraction: %v is not in (0, 1)", f)
		}
		c.renewFraction = f
		return nil
	}
}

// WithSafetyMargin sets how long before the earliest possible server-side expiry a lease
// context ends (default a tenth of the ttl). It absorbs the difference in rate between the
// client's and the server's clocks and the time work takes to notice that its context ended.
// Acquire refuses a ttl that is not longer than the margin.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("WithSafetyMargin: %v is not positive", d)
		}
		c.margin = d
		return nil
	}
}

// WithAcquireAttempts sets how many times an acquire is sent when the network or the server
// fails (default 4). Every attempt carries the same Idempotency-Key.
func WithAcquireAttempts(n int) Option {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("WithAcquireAttempts: %d is below 1", n)
		}
		c.attempts = n
		return nil
	}
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
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	c.api, err = wire.NewClientWithResponses(c.baseURL, wire.WithHTTPClient(c.httpClient),
		wire.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if r.Header.Get("User-Agent") == "" {
				r.Header.Set("User-Agent", c.userAgent)
			}
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
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
}

func grantOf(l *wire.Lease) Grant {
	g := Grant{Name: l.Name, Holder: l.Holder, LeaseID: deref(l.LeaseId), Token: l.Token,
		TTL: time.Duration(l.TtlMs) * time.Millisecond, LockDelay: time.Duration(l.LockDelayMs) * time.Millisecond,
		AcquiredAt: l.AcquiredAt.Time, RenewedAt: l.RenewedAt.Time, ExpiresAt: l.ExpiresAt.Time}
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
}

func stateOf(s *wire.LeaseState) State {
	st := State{Name: s.Name, Held: s.Held, Holder: s.Holder, Token: s.Token,
		TTL: time.Duration(s.TtlMs) * time.Millisecond, LockDelay: time.Duration(s.LockDelayMs) * time.Millisecond,
		AcquiredAt: deref(s.AcquiredAt).Time, RenewedAt: deref(s.RenewedAt).Time, ExpiresAt: deref(s.ExpiresAt).Time,
		EndedAt: deref(s.EndedAt).Time, End: string(deref(s.End)), AvailableAt: deref(s.AvailableAt).Time, Waiters: s.Waiters}
	if s.Metadata != nil {
		st.Metadata = *s.Metadata
	}
	return st
}

// Get returns the state of a name; a name never used is ErrNotFound.
func (c *Client) Get(ctx context.Context, name string) (State, error) {
	resp, err := c.api.GetLeaseWithResponse(ctx, name)
	if err != nil {
		return State{}, fmt.Errorf("get %q: %w", name, err)
	}
	if resp.JSON200 == nil {
		return State{}, fmt.Errorf("get %q: %w", name, problemOf(resp.StatusCode(), resp.Body))
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
		return Page{}, fmt.Errorf("list leases: %w", err)
	}
	if resp.JSON200 == nil {
		return Page{}, fmt.Errorf("list leases: %w", problemOf(resp.StatusCode(), resp.Body))
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
	body := wire.RenewRequest{LeaseId: leaseID}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		body.TtlMs = &ms
	}
	resp, err := c.api.RenewLeaseWithResponse(ctx, name, body)
	if err != nil {
		return Grant{}, fmt.Errorf("renew %q: %w", name, err)
	}
	if resp.JSON200 == nil {
		return Grant{}, fmt.Errorf("renew %q: %w", name, problemOf(resp.StatusCode(), resp.Body))
	}
	return grantOf(resp.JSON200), nil
}

// Release ends the lease with this lease_id. Repeating it succeeds; a lease that had already
// expired or been revoked is ErrLeaseLost.
func (c *Client) Release(ctx context.Context, name, leaseID string) error {
	resp, err := c.api.ReleaseLeaseWithResponse(ctx, name, wire.ReleaseRequest{LeaseId: leaseID})
	if err != nil {
		return fmt.Errorf("release %q: %w", name, err)
	}
	if resp.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("release %q: %w", name, problemOf(resp.StatusCode(), resp.Body))
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
		return fmt.Errorf("revoke %q: %w", name, err)
	}
	if resp.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("revoke %q: %w", name, problemOf(resp.StatusCode(), resp.Body))
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
		return ae.transient()
	}
	return true
}
