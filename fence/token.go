package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Header is the HTTP header that carries a fencing token, in requests to a
// fenced resource and in leasekeeper's answer to acquire.
const Header = "Fencing-Token"

// MaxToken is the largest valid fencing token, 2^53 - 1: tokens stay exact in
// JSON and JavaScript numbers.
const MaxToken int64 = 1<<53 - 1

// ErrStaleToken matches (with errors.Is) every *StaleTokenError: a write
// refused because its token is below the fence, by a resource of your own
// (Table, Exec, Middleware) or by leasekeeper (the client's PutResource, whose
// ErrStaleToken is this same value).
var ErrStaleToken = errors.New("stale fencing token")

// ErrStale is ErrStaleToken under its former name.
//
// Deprecated: use ErrStaleToken.
var ErrStale = ErrStaleToken

// ErrInvalidToken is returned for a token that is negative or above MaxToken,
// and wrapped by ParseToken for a header value that is not a token.
var ErrInvalidToken = errors.New("invalid fencing token")

// ErrNoRow is returned by the SQL helpers when a conditional statement changed
// nothing because the key has no row (rather than because the token is stale).
var ErrNoRow = errors.New("no row for key")

// StaleTokenError reports a write refused because its token is below the
// fence of what it wrote. errors.Is(err, ErrStaleToken) is true for it. The
// client package returns this same type for writes leasekeeper refused.
type StaleTokenError struct {
	// Resource is what was written: a row key, a URL path, a leasekeeper
	// resource.
	Resource string
	// Lease is the lease the token came from, when known.
	Lease string
	// PresentedToken is the token the write carried.
	PresentedToken int64
	// CurrentFence is the fence when the write was refused: greater than
	// PresentedToken, or, for a write checked against a lease, that lease's
	// current token.
	CurrentFence int64
	// Detail is the explanation of the side that refused, when it gave one.
	Detail string
}

// Error describes the refusal.
func (e *StaleTokenError) Error() string {
	msg := fmt.Sprintf("fence %q: stale token %d, current fence is %d", e.Resource, e.PresentedToken, e.CurrentFence)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Rejection returns the refusal in the form a Reporter sends, with reason as
// its free text.
func (e *StaleTokenError) Rejection(reason string) Rejection {
	return Rejection{Resource: e.Resource, Lease: e.Lease, PresentedToken: e.PresentedToken, CurrentFence: e.CurrentFence, Reason: reason}
}

// ParseToken parses a Fencing-Token header value: decimal ASCII digits only
// (no sign, no spaces, no commas), with a value of at most MaxToken. Every
// error it returns wraps ErrInvalidToken.
func ParseToken(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("%w: %q is negative", ErrInvalidToken, truncate(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a decimal integer", ErrInvalidToken, truncate(s))
		}
	}
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil || t > MaxToken {
		return 0, fmt.Errorf("%w: %q is above %d", ErrInvalidToken, truncate(s), MaxToken)
	}
	return t, nil
}

// checkToken returns an error wrapping ErrInvalidToken when t is out of range.
func checkToken(t int64) error {
	if t < 0 || t > MaxToken {
		return fmt.Errorf("%w: %d is outside 0..%d", ErrInvalidToken, t, MaxToken)
	}
	return nil
}

// truncate keeps error messages short when a client sends a huge header.
func truncate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

type tokenKey struct{}

// ContextWithToken returns a copy of ctx that carries token; Middleware uses
// it for every request it accepts, and tests of handlers can use it directly.
func ContextWithToken(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFromContext returns the fencing token that Middleware accepted for the
// request whose context is ctx, and whether there is one.
func TokenFromContext(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}
