package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"encoding/json"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/fence"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrLeaseHeld means somebody else holds the lease (or the name is inside its lock delay).
	// The error is a *HeldError with the details.
	ErrLeaseHeld = errors.New("lease held")
	// ErrLeaseLost means the lease ended before its holder was done: a renewal or release was
	// refused with lease_lost (expired, revoked, superseded), or the client-side deadline passed.
	// Work done under it may have overlapped another holder's.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound means the server answered 404 not_found.
	ErrNotFound = errors.New("not found")
	// ErrStaleToken means a fenced write was refused because its token is stale; the error is
	// a *StaleTokenError. It is fence.ErrStaleToken, so one test covers writes refused by
	// leasekeeper and by resources of your own.
	ErrStaleToken = fence.ErrStaleToken
	// ErrReleased is the cause of a lease context that ended because Release was called.
	ErrReleased = errors.New("lease released")
)

// APIError is an RFC 9457 problem answered by the server, or an unexpected answer.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the problem's stable code (invalid_request, lease_lost, …); empty when the
	// answer was not a problem document (a proxy's error page, say).
	Code string
	// Detail is the server's human explanation, or the start of the body.
	Detail string
	// RequestID is the server's request ID, to find the request in its log.
	RequestID string
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	if e.Detail == "" {
		return fmt.Sprintf("%d %s", e.Status, code)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, code, e.Detail)
}

// Is makes errors.Is(err, ErrLeaseLost), ErrLeaseHeld, ErrNotFound and ErrStaleToken match
// problems with those codes.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrLeaseLost:
		return e.Code == string(wire.ProblemCodeLeaseLost)
	case ErrLeaseHeld:
		return e.Code == string(wire.ProblemCodeLeaseHeld)
	case ErrNotFound:
		return e.Code == string(wire.ProblemCodeNotFound)
	case ErrStaleToken:
		return e.Code == string(wire.ProblemCodeStaleToken)
	}
	return false
}

// transient reports whether repeating the request may succeed: the server or a proxy in
// front of it is briefly unable to answer.
func (e *APIError) transient() bool {
	return e.Status >= 500 || e.Code == string(wire.ProblemCodeUnavailable)
}

// HeldError is the answer to an acquire of a lease somebody else holds.
type HeldError struct {
	// Name is the lease asked for.
	Name string
	// Holder is the current holder.
	Holder string
	// ExpiresAt is when the current lease expires unless renewed, by the server's clock.
	ExpiresAt time.Time
	// AvailableAt is when the name can be granted again (expiry plus any lock delay).
	AvailableAt time.Time
	// RetryAfter is how long the server suggests waiting before asking again.
	RetryAfter time.Duration
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %q until %s", e.Name, e.Holder, e.ExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// StaleTokenError is the answer to a fenced write whose token was refused: the one type the
// fence package returns for refusals by resources of your own.
type StaleTokenError = fence.StaleTokenError

// problemOf turns a non-success answer into an *APIError. The body is decoded as a problem
// when it is one; anything else (a proxy's HTML page) keeps its first line as the detail.
func problemOf(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var p wire.Problem
	if err := json.Unmarshal(body, &p); err == nil && p.Code != "" {
		e.Code = string(p.Code)
		e.Detail = deref(p.Detail)
		e.RequestID = deref(p.RequestId)
		return e
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 200 {
		line = line[:200]
	}
	e.Detail = line
	return e
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
