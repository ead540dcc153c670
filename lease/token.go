package lease

import (
	"fmt"
	"time"
)

// MaxToken is the largest fencing token: tokens stay below 2^53 so that they are exact in JSON
// and in JavaScript numbers.
const MaxToken int64 = 1<<53 - 1

// NextToken is the token rule of invariant 2: max(last+1, unix microseconds of now). Because the
// token tracks the clock, a database restored from an older backup still issues tokens above
// every token issued before the restore, as long as the clock has moved on since.
func NextToken(last int64, now time.Time) (int64, error) {
	t := now.UnixMicro()
	if t <= last {
		t = last + 1
	}
	if t > MaxToken || t < 1 {
		return 0, fmt.Errorf("next token after %d at %v: out of range", last, now)
	}
	return t, nil
}

// ScopedLastToken is the last issued token as a key limited to some names may know it: the
// highest token issued to a lease in its scope (inScope), or the clock in microseconds when
// that is higher. Every token to come is at least the clock's (NextToken), so a fence raised
// to this bound is still passed by every grant to come; and tokens issued outside the scope do
// not move it, so which tokens a scoped key is told were never issued (token_not_issued)
// reveals nothing of them (invariant 8).
func ScopedLastToken(inScope int64, now time.Time) int64 { return max(inScope, now.UnixMicro()) }

// ValidatePresentedToken checks a token a client presents with a fenced write: 0 (a writer
// that never held a lease) up to MaxToken. Codes: invalid_request.
func ValidatePresentedToken(t int64) error {
	if t < 0 || t > MaxToken {
		return Errorf(CodeInvalid, "Fencing-Token %d is outside [0, %d]", t, MaxToken)
	}
	return nil
}

// ValidToken reports whether t could have been issued: 0 < t ≤ MaxToken.
func ValidToken(t int64) bool { return t > 0 && t <= MaxToken }
