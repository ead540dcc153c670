package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
)

// Option configures Middleware.
type Option func(*config)

type config struct {
	key      func(*http.Request) string
	methods  map[string]bool
	onReject func(context.Context, Rejection)
	onError  func(*http.Request, error)
	locks    *keyLocks
	modes    Modes
	hw       HighWater
}

// WithModes makes the middleware refuse a shared (read) lease's token, as leasekeeper's own
// fenced writes do, asking m for each token's mode (give it a ModeCache: a token's mode never
// changes). A reader's token is answered 409 shared_token, reported to the WithOnReject
// callback, and raises no mark. It fails closed: a token m knows no grant of is answered 409
// unknown_token, and one m cannot tell (the server does not answer) 503 unavailable, passed to
// the WithErrorLog callback; neither raises the mark.
func WithModes(m Modes) Option {
	return func(c *config) { c.modes = m }
}

// WithKey sets how the fenced key is derived from a request; the default is
// the URL path. A request whose key is empty is refused with 400.
func WithKey(key func(*http.Request) string) Option {
	return func(c *config) { c.key = key }
}

// WithMethods sets which request methods are checked; the default is POST,
// PUT, PATCH and DELETE. Requests with other methods pass through unchecked
// and carry no token in their context.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		c.methods = make(map[string]bool, len(methods))
		for _, m := range methods {
			c.methods[m] = true
		}
	}
}

// WithOnReject sets a callback called for every request refused as stale,
// before the 409 is written, with the request's context detached from its
// cancellation. It runs on the request path: give it something that returns
// at once, such as the Report method of Reporter.Async.
func WithOnReject(f func(context.Context, Rejection)) Option {
	return func(c *config) { c.onReject = f }
}

// WithErrorLog sets a callback for HighWater failures other than a stale
// token; such requests are answered 500 with a generic message.
func WithErrorLog(f func(*http.Request, error)) Option {
	return func(c *config) { c.onError = f }
}

// Serialize makes the middleware hold a per-key lock (in this process) from
// the check until the handler returns, so that the handler's effects for one
// key happen in token order. Without it, requests with tokens 5 and 6 may
// both pass the check (5 first) and the handler for 5 may finish last. Use it
// when the handler's write is not itself fenced (for example with Table).
// A request that gives up while waiting for the lock is answered 503.
func Serialize() Option {
	return func(c *config) { c.locks = &keyLocks{m: make(map[string]*keyLock)} }
}

// Middleware returns HTTP middleware that fences requests. For each request
// with a checked method it reads the Fencing-Token header and answers, as
// RFC 9457 application/problem+json with a stable code:
//
//   - 428 precondition_required when the header is missing;
//   - 400 invalid_request when it is not one decimal integer in 0..MaxToken
//     (or the request has no key);
//   - 409 stale_token, with presented_token and current_fence, when hw
//     reports the token below the key's mark;
//   - with WithModes, 409 shared_token for a shared (read) lease's token,
//     409 unknown_token for a token of no known grant, and 503 unavailable
//     when the token's mode cannot be learned, all before hw is asked;
//   - 500 internal when hw fails otherwise.
//
// Otherwise hw has raised the key's mark to the token, and the request goes
// to next with the token in its context (TokenFromContext).
func Middleware(hw HighWater, opts ...Option) func(http.Handler) http.Handler {
	c := config{key: func(r *http.Request) string { return r.URL.Path }, hw: hw}
	WithMethods(http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete)(&c)
	for _, o := range opts {
		o(&c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !c.methods[r.Method] {
				next.ServeHTTP(w, r)
				return
			}
			vals := r.Header.Values(Header)
			if len(vals) == 0 {
				writeProblem(w, problem{Status: http.StatusPreconditionRequired, Code: "precondition_required",
					Detail: "this request must carry a " + Header + " header"})
				return
			}
			if len(vals) > 1 {
				writeProblem(w, problem{Status: http.StatusBadRequest, Code: "invalid_request",
					Detail: "more than one " + Header + " header"})
				return
			}
			token, err := ParseToken(vals[0])
			if err != nil {
				writeProblem(w, problem{Status: http.StatusBadRequest, Code: "invalid_request",
					Detail: Header + ": " + err.Error()})
				return
			}
			key := c.key(r)
			if key == "" {
				writeProblem(w, problem{Status: http.StatusBadRequest, Code: "invalid_request",
					Detail: "the request names no fenced resource"})
				return
			}
			// Before the lock and the mark: a token's mode never changes, and a reader's must
			// not raise the mark that a writer's is then checked against.
			if err := checkMode(r.Context(), c.modes, key, leaseName(r), token); err != nil {
				c.refuseMode(w, r, key, token, err)
				return
			}
			if c.locks != nil {
				unlock, err := c.locks.lock(r.Context(), key)
				if err != nil {
					writeProblem(w, problem{Status: http.StatusServiceUnavailable, Code: "unavailable",
						Detail: "gave up waiting for the resource"})
					return
				}
				defer unlock()
			}
			current, err := hw.Advance(r.Context(), key, token)
			if err != nil {
				if !errors.Is(err, ErrStaleToken) {
					if c.onError != nil {
						c.onError(r, fmt.Errorf("fence %q: %w", key, err))
					}
					writeProblem(w, problem{Status: http.StatusInternalServerError, Code: "internal",
						Detail: "the fencing token could not be checked"})
					return
				}
				if se, ok := errors.AsType[*StaleTokenError](err); ok {
					current = se.CurrentFence
				}
				if c.onReject != nil {
					// The refusal is reported even when the client has gone away meanwhile.
					c.onReject(context.WithoutCancel(r.Context()), Rejection{
						Resource:       key,
						Lease:          leaseName(r),
						PresentedToken: token,
						CurrentFence:   current,
						Reason:         "stale token on " + r.Method + " " + truncate(r.URL.Path),
					})
				}
				writeProblem(w, problem{Status: http.StatusConflict, Code: "stale_token",
					Detail:         fmt.Sprintf("fencing token %d is below the current fence %d", token, current),
					PresentedToken: &token, CurrentFence: &current})
				return
			}
			next.ServeHTTP(w, r.WithContext(ContextWithToken(r.Context(), token)))
		})
	}
}

// refuseMode answers a request whose token's mode check failed (checkMode's error).
func (c *config) refuseMode(w http.ResponseWriter, r *http.Request, key string, token int64, err error) {
	if se, ok := errors.AsType[*SharedTokenError](err); ok {
		if c.onReject != nil {
			current := int64(0) // the key's mark, when hw tells it (Memory does)
			if mk, ok := c.hw.(interface{ Mark(string) (int64, bool) }); ok {
				current, _ = mk.Mark(key)
			}
			c.onReject(context.WithoutCancel(r.Context()), se.Rejection(current, "shared token on "+r.Method+" "+truncate(r.URL.Path)))
		}
		writeProblem(w, problem{Status: http.StatusConflict, Code: CodeSharedToken,
			Detail: fmt.Sprintf("fencing token %d is a shared (read) lease's; readers do not write", token), PresentedToken: &token})
		return
	}
	if errors.Is(err, ErrUnknownToken) {
		writeProblem(w, problem{Status: http.StatusConflict, Code: "unknown_token",
			Detail: fmt.Sprintf("no grant is known for fencing token %d", token), PresentedToken: &token})
		return
	}
	if c.onError != nil {
		c.onError(r, err)
	}
	writeProblem(w, problem{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Detail: "the fencing token's mode could not be checked; try again"})
}

// leaseNameRE is leasekeeper's rule for lease names.
var leaseNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// leaseName returns the request's Lease-Name header when it is a valid name.
func leaseName(r *http.Request) string {
	if n := r.Header.Get("Lease-Name"); leaseNameRE.MatchString(n) {
		return n
	}
	return ""
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Code           string `json:"code"`
	Detail         string `json:"detail,omitempty"`
	PresentedToken *int64 `json:"presented_token,omitempty"`
	CurrentFence   *int64 `json:"current_fence,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	p.Type = "about:blank"
	p.Title = http.StatusText(p.Status)
	body, err := json.Marshal(p)
	if err != nil {
		// Unreachable: problem holds only strings and integers.
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// keyLocks is a set of per-key mutexes that waits can abandon; an entry lives
// only while someone holds or waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; k.release(key, l) }, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.m, key)
	}
}
