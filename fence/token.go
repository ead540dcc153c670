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

// ErrStale matches (with errors.Is) every *StaleTokenError.
var ErrStale = errors.New("stale fencing token")

// ErrInvalidToken is returned for a token that is negative or above MaxToken,
// and wrapped by ParseToken for a header value that is not a token.
var ErrInvalidToken = errors.New("invalid fencing token")

// ErrNoRow is returned by the SQL helpers when a conditional statement changed
// nothing because the key has no row (rather than because the token is stale).
var ErrNoRow = errors.New("no row for key")

// StaleTokenError reports a write refused because its token is below the
// key's fence. errors.Is(err, ErrStale) is true for it.
type StaleTokenError struct {
	// Key is the fenced key (a row key, or a resource such as a URL path).
	Key string
	// Presented is the token the write carried.
	Presented int64
	// Current is the key's fence when the write was refused; it is greater
	// than Presented.
	Current int64
}

// Error describes the refusal.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence %q: stale token %d, current fence is %d", e.Key, e.Presented, e.Current)
}

// Is reports whether target is ErrStale.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStale }

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
