package fence

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrSharedToken matches (with errors.Is) every *SharedTokenError: a write refused because
// its token is a shared (read) lease's. Readers do not write, whatever the fence.
var ErrSharedToken = errors.New("shared (read) lease's fencing token")

// ErrModeUnknown is wrapped by the error of a write refused because the mode of its token
// could not be learned: the lookup failed (the server did not answer) or knows no grant of
// the token (ErrUnknownToken). With Modes set, a token is accepted only once it is known to be
// a writer's: the helpers fail closed.
var ErrModeUnknown = errors.New("the fencing token's mode could not be learned")

// ErrUnknownToken is what a Modes returns (wrapped) for a token it knows no grant of: never
// issued, issued to a grant the server's history no longer keeps, or on a name outside the
// scope of the key that asks.
var ErrUnknownToken = errors.New("no grant is known for the fencing token")

// SharedTokenError reports a write refused because its token is a shared (read) lease's.
// errors.Is(err, ErrSharedToken) is true for it; errors.Is(err, ErrStaleToken) is not: the
// token may well be above the fence.
type SharedTokenError struct {
	// Resource is what was written: a row key, a URL path.
	Resource string
	// Lease is the lease the token came from, when known.
	Lease string
	// PresentedToken is the reader's token the write carried.
	PresentedToken int64
}

// Error describes the refusal.
func (e *SharedTokenError) Error() string {
	return fmt.Sprintf("fence %q: token %d is a shared (read) lease's, and readers do not write", e.Resource, e.PresentedToken)
}

// Is reports whether target is ErrSharedToken.
func (e *SharedTokenError) Is(target error) bool { return target == ErrSharedToken }

// Rejection returns the refusal in the form a Reporter sends, with the resource's fence
// (current, 0 when it has none) and reason as its free text.
func (e *SharedTokenError) Rejection(current int64, reason string) Rejection {
	return Rejection{Resource: e.Resource, Lease: e.Lease, PresentedToken: e.PresentedToken, CurrentFence: current,
		Code: CodeSharedToken, Reason: reason}
}

// CodeSharedToken is the problem code of a refusal of a reader's token, leasekeeper's and
// Middleware's alike, and the Code of its Rejection.
const CodeSharedToken = "shared_token"

// Modes tells a shared (read) lease's token from an exclusive one's. The Go client's Client
// implements it by asking leasekeeper (GET /v1/tokens/{token}); wrap it in a ModeCache, since
// a token's mode never changes once issued. Shared returns an error wrapping ErrUnknownToken
// for a token it knows no grant of.
type Modes interface {
	Shared(ctx context.Context, token int64) (bool, error)
}

// DefaultModeCacheSize is the most tokens a ModeCache remembers when its size is zero.
const DefaultModeCacheSize = 10000

// ModeCache is a Modes that asks another one once per token and remembers the answer for
// good: a token's mode never changes once issued. It keeps at most its size of tokens, the
// least recently used going first; failures and unknown tokens are not remembered (the next
// write asks again). It is safe for concurrent use.
type ModeCache struct {
	src Modes
	max int

	mu       sync.Mutex
	entries  map[int64]*list.Element // of modeEntry
	order    list.List               // most recently used first
	inFlight map[int64]*modeCall     // lookups under way, which later askers of the token wait for
}

// modeCall is one lookup of a token; done is closed once shared and err are set.
type modeCall struct {
	done   chan struct{}
	shared bool
	err    error
}

type modeEntry struct {
	token  int64
	shared bool
}

var _ Modes = (*ModeCache)(nil)

// NewModeCache returns a ModeCache over src keeping at most size tokens (DefaultModeCacheSize
// when size is 0 or less).
func NewModeCache(src Modes, size int) *ModeCache {
	if size <= 0 {
		size = DefaultModeCacheSize
	}
	return &ModeCache{src: src, max: size, entries: make(map[int64]*list.Element), inFlight: make(map[int64]*modeCall)}
}

// Shared implements Modes: the remembered answer, else src's (remembered when it is one).
// Writes of a new token that arrive together ask src once: the others wait for that answer
// (or for their ctx to end), and a failed lookup fails them all (they are refused, and the
// next write asks again).
func (c *ModeCache) Shared(ctx context.Context, token int64) (bool, error) {
	c.mu.Lock()
	if el, ok := c.entries[token]; ok {
		c.order.MoveToFront(el)
		shared := el.Value.(modeEntry).shared
		c.mu.Unlock()
		return shared, nil
	}
	if call, ok := c.inFlight[token]; ok {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.shared, call.err
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
	call := &modeCall{done: make(chan struct{})}
	c.inFlight[token] = call
	c.mu.Unlock()

	// Asked without the lock: a slow server holds up only the writes of this token.
	call.shared, call.err = c.src.Shared(ctx, token)

	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inFlight, token)
	close(call.done)
	if call.err != nil {
		return false, call.err
	}
	c.entries[token] = c.order.PushFront(modeEntry{token: token, shared: call.shared})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(modeEntry).token)
	}
	return call.shared, nil
}

// Len returns how many tokens c remembers.
func (c *ModeCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// checkMode returns nil when m is nil or knows token as a writer's, a *SharedTokenError
// when it is a reader's, and an error wrapping ErrModeUnknown (and the lookup's error) when
// m cannot tell.
func checkMode(ctx context.Context, m Modes, resource, leaseName string, token int64) error {
	if m == nil {
		return nil
	}
	shared, err := m.Shared(ctx, token)
	if err != nil {
		return fmt.Errorf("fence %q: token %d: %w: %w", resource, token, ErrModeUnknown, err)
	}
	if shared {
		return &SharedTokenError{Resource: resource, Lease: leaseName, PresentedToken: token}
	}
	return nil
}
