package lease

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. It is part of the wire contract.
type Code string

// The error codes of the contract.
const (
	CodeInvalid      Code = "invalid_request"
	CodeNotFound     Code = "not_found"
	CodeHeld         Code = "lease_held"
	CodeLost         Code = "lease_lost"
	CodeStale        Code = "stale_token"
	CodeNotIssued    Code = "token_not_issued"
	CodePrecondition Code = "precondition_required"
	// CodePreconditionFailed is a conditional write whose condition (the resource's version,
	// or that it does not exist) did not hold.
	CodePreconditionFailed Code = "precondition_failed"
	CodeTooManyWaiters     Code = "too_many_waiters"
	CodeTooManyWatchers    Code = "too_many_watchers"
	CodeTooLarge           Code = "payload_too_large"
	CodeForbidden          Code = "forbidden"
	CodeUnavailable        Code = "unavailable"
	CodeUnauthenticated    Code = "unauthenticated"
	CodeRateLimited        Code = "rate_limited"
	CodeTooManyLeases      Code = "too_many_leases"
	// CodeTooManySessions refuses to open a session for a key that has as many open as it may.
	CodeTooManySessions Code = "too_many_sessions"
	// CodeQuotaExceeded refuses a fenced write that would make a key's resources more, or
	// larger in all, than it may have.
	CodeQuotaExceeded Code = "quota_exceeded"
	CodeInternal      Code = "internal"
	// CodeNotHeld refuses a handover request for a name nobody holds now.
	CodeNotHeld Code = "not_held"
	// CodeSessionLost refuses an act under a session that expired or was closed.
	CodeSessionLost Code = "session_lost"
	// CodeLimitMismatch refuses an acquire whose limit differs from the one the name is held
	// with (a semaphore's, or none for a plain lease).
	CodeLimitMismatch Code = "limit_mismatch"
	// CodeSharedToken refuses a fenced write that presents a shared (read) grant's token:
	// readers do not write.
	CodeSharedToken Code = "shared_token"

	// CodeWaitingUnsupported refuses wait_ms on a server without a waiting line: the client
	// waits on its side instead, asking again without wait_ms.
	CodeWaitingUnsupported Code = "waiting_unsupported"
)

// Error is a domain error: a code, a human message, and the details some codes carry.
// Find it through wrapping with errors.As, or test the code with ErrorCode.
type Error struct {
	Code    Code
	Message string

	// For CodeHeld: the current holder, when its lease expires and when the name is
	// available again (expiry plus lock delay, or the end of a lock delay already running).
	Holder      string
	ExpiresAt   time.Time
	AvailableAt time.Time

	// For CodeStale, CodeNotIssued and CodeSharedToken: the token presented and the resource's fence.
	PresentedToken int64
	CurrentFence   int64

	// Fields lists the rule each invalid field broke, for CodeInvalid.
	Fields []string

	// Held lists, for CodeHeld of an acquire of several names, the names that refused it.
	Held []string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal for any other
// non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the code.
func IsCode(err error, code Code) bool { return err != nil && ErrorCode(err) == code }
