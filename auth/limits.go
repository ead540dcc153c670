package auth

import (
	"fmt"
	"math"
	"sync"

	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/lease"
)

// Limits bounds what one non-admin key may ask of the server: how fast, and how much it may
// make the server hold. Zero fields do not bound. Admin keys, and requests with keys off, are
// not bound at all.
type Limits struct {
	// Rate and Burst bound the requests of each key (golang.org/x/time/rate).
	Rate  rate.Limit
	Burst int
	// MaxHeld, MaxWaits, MaxWatches and MaxSessions cap the unexpired leases, the acquires
	// waiting in line, the open watch streams and the open sessions of one key.
	MaxHeld, MaxWaits, MaxWatches, MaxSessions int
	// ResourceQuota bounds the fenced resources one key may have written last.
	ResourceQuota lease.Quota
}

// Hold is a kind of long request a key may hold only so many of.
type Hold int

// The long requests that Gate.Hold counts.
const (
	HoldWait  Hold = iota // an acquire waiting in line
	HoldWatch             // a watch stream
)

// Gate keeps each key within its Limits: its request rate, and the long requests it holds.
// The caps on what the store keeps (leases, sessions, resources) are checked by the store in
// the transaction that would pass them; Gate says what they are for a caller.
type Gate struct {
	limits Limits

	mu      sync.Mutex
	limiter map[string]*rate.Limiter // key id → its rate
	held    map[string]*[2]int       // key id → waits, watches in progress
}

// NewGate returns a gate that keeps keys within l.
func NewGate(l Limits) *Gate {
	return &Gate{limits: l, limiter: map[string]*rate.Limiter{}, held: map[string]*[2]int{}}
}

// Capped reports whether the per-key limits apply to the principal: not to an admin key, nor
// with keys off.
func (p Principal) Capped() bool { return p.KeyID != "" && !p.IsAdmin() }

// AllowRate takes one request of the principal's key from its rate. Codes: rate_limited.
func (g *Gate) AllowRate(p Principal) error {
	if g.limits.Rate == 0 || !p.Capped() {
		return nil
	}
	g.mu.Lock()
	l, ok := g.limiter[p.KeyID]
	if !ok {
		l = rate.NewLimiter(g.limits.Rate, max(1, g.limits.Burst))
		g.limiter[p.KeyID] = l
	}
	g.mu.Unlock()
	if l.Allow() {
		return nil
	}
	return &lease.Error{Code: lease.CodeRateLimited, Message: fmt.Sprintf("API key %s sent more than %g requests a second (burst %d)", p.KeyID, float64(g.limits.Rate), l.Burst())}
}

// RetryAfterRate is the Retry-After, in seconds, of a request refused for its rate: the time
// one request takes to come back.
func (g *Gate) RetryAfterRate() int {
	if g.limits.Rate <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/float64(g.limits.Rate))))
}

// Hold reserves one long request of a kind for the principal's key, within its cap. Call the
// returned func when it ends. Codes: too_many_waiters, too_many_watchers.
func (g *Gate) Hold(p Principal, kind Hold) (func(), error) {
	limit := g.limits.MaxWaits
	if kind == HoldWatch {
		limit = g.limits.MaxWatches
	}
	if limit == 0 || !p.Capped() {
		return func() {}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.held[p.KeyID]
	if !ok {
		n = new([2]int)
		g.held[p.KeyID] = n
	}
	if n[kind] >= limit {
		if kind == HoldWatch {
			return nil, lease.Errorf(lease.CodeTooManyWatchers, "API key %s has %d watch streams open, the most one key may have", p.KeyID, n[kind])
		}
		return nil, lease.Errorf(lease.CodeTooManyWaiters, "API key %s has %d acquires waiting, the most one key may have", p.KeyID, n[kind])
	}
	n[kind]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		n[kind]--
		if n[HoldWait] == 0 && n[HoldWatch] == 0 {
			delete(g.held, p.KeyID)
		}
	}, nil
}

// Forget drops what the gate keeps of a key (its rate), when the key is revoked.
func (g *Gate) Forget(keyID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.limiter, keyID)
}

// MaxHeld is the cap on unexpired leases the principal's key may hold; 0 for none.
func (g *Gate) MaxHeld(p Principal) int {
	if !p.Capped() {
		return 0
	}
	return g.limits.MaxHeld
}

// MaxSessions is the cap on open sessions the principal's key may have; 0 for none.
func (g *Gate) MaxSessions(p Principal) int {
	if !p.Capped() {
		return 0
	}
	return g.limits.MaxSessions
}

// Quota is the resource quota of the principal's key; zero for none.
func (g *Gate) Quota(p Principal) lease.Quota {
	if !p.Capped() {
		return lease.Quota{}
	}
	return g.limits.ResourceQuota
}

// IdempotencyKey scopes a client's Idempotency-Key to the calling key and the lease name, and
// keys it with the server's secret: what the store keeps cannot be guessed from public fields
// nor recovered from a copy of the database. An empty key stays empty. Codes: invalid_request
// (not 16 to 255 printable ASCII characters).
func IdempotencyKey(secret []byte, p Principal, name, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	if len(key) < 16 || len(key) > 255 {
		return "", lease.Errorf(lease.CodeInvalid, "Idempotency-Key must be 16 to 255 characters, got %d (use a random UUID)", len(key))
	}
	for _, c := range key {
		if c < ' ' || c > '~' {
			return "", lease.Errorf(lease.CodeInvalid, "Idempotency-Key must be printable ASCII")
		}
	}
	return fmt.Sprintf("%x", MAC(secret, "idempotency", p.KeyID, name, key)), nil
}
