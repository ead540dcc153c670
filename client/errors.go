package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
	"github.com/leasekeeper/leasekeeper/fence"
	"github.com/leasekeeper/leasekeeper/lease"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrLeaseHeld means somebody else holds the lease (or the name is inside its lock delay).
	// The error is a *HeldError with the details.
	ErrLeaseHeld = errors.New("lease held")
	// ErrLeaseLost means the lease ended before its holder was done: a renewal or release was
	// refused with lease_lost (expired, revoked, superseded), the watch stream showed it
	// ending, or the client-side deadline passed. Work done under it may have overlapped
	// another holder's.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound means the server answered 404 not_found.
	ErrNotFound = errors.New("not found")
	// ErrStaleToken means a fenced write was refused because its token is stale; the error is
	// a *StaleTokenError. It is fence.ErrStaleToken, so one test covers writes refused by
	// leasekeeper and by resources of your own.
	ErrStaleToken = fence.ErrStaleToken
	// ErrSharedToken means a fenced write was refused because its token is a shared (read)
	// lease's (409 shared_token). It is fence.ErrSharedToken, which the fence helpers return
	// for such writes too (with fence.WithModes, Table.Modes or Write.Modes).
	ErrSharedToken = fence.ErrSharedToken
	// ErrInvalid means a request broke the contract's rules (a bad name, holder or ttl, a
	// ttl outside the server's bounds): caught by the client before sending, or answered 400
	// invalid_request. Repeating the request cannot succeed.
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable means the server could not be reached, or answered that it cannot serve
	// now (502, 503, 504), after the retries the operation makes. Trying again later may work.
	ErrUnavailable = errors.New("leasekeeper unavailable")
	// ErrReleased is the cause of a lease context that ended because Release was called.
	ErrReleased = errors.New("lease released")
	// ErrClosed is returned by operations that start background work (Acquire, Campaign,
	// Observe) on a closed Client, and is the cause of the lease contexts Close ended.
	ErrClosed = errors.New("client closed")

	// ErrNotLeader is Proclaim by a candidate that does not lead the election.
	ErrNotLeader = errors.New("not the leader")
)

// StaleTokenError is the answer to a fenced write whose token was refused: the one type the
// fence package returns for refusals by resources of your own.
type StaleTokenError = fence.StaleTokenError

// APIError is an RFC 9457 problem answered by the server, or an unexpected answer.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the problem's stable code (invalid_request, lease_lost, …); empty when the
	// answer was not a problem document (a proxy's error page, say).
	Code string
	// Detail is the server's human explanation, or the start of the body.
	Detail string
	// Errors lists the rule each invalid field broke, for invalid_request.
	Errors []string
	// RequestID is the server's request ID, to find the request in its log.
	RequestID string
	// RetryAfter is how long the server asked to wait before trying again (Retry-After).
	RetryAfter time.Duration
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

// Is makes errors.Is(err, ErrLeaseLost), ErrLeaseHeld, ErrNotFound, ErrStaleToken,
// ErrSharedToken and ErrInvalid match problems with those codes, and ErrUnavailable match answers that say the
// server cannot serve now.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrLeaseLost:
		return e.Code == CodeLeaseLost
	case ErrLeaseHeld:
		return e.Code == CodeLeaseHeld
	case ErrNotFound:
		return e.Code == CodeNotFound
	case ErrStaleToken:
		return e.Code == CodeStaleToken
	case ErrSharedToken:
		return e.Code == CodeSharedToken
	case ErrInvalid:
		return e.Code == CodeInvalidRequest
	case ErrUnavailable:
		return e.transient()
	}
	return false
}

// transient reports whether repeating the request may succeed: the server or a proxy in
// front of it is briefly unable to answer.
func (e *APIError) transient() bool {
	return e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable ||
		e.Status == http.StatusGatewayTimeout || e.Code == CodeUnavailable
}

// retryable reports whether a server's answer is worth repeating: a failure of the server
// rather than of the request.
func (e *APIError) retryable() bool { return e.Status >= 500 || e.transient() }

// names reports whether the problem names field among its invalid fields.
func (e *APIError) names(field string) bool {
	for _, f := range e.Errors {
		if strings.HasPrefix(f, field+":") {
			return true
		}
	}
	return false
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
	// Held lists, for an acquire of several names, the names that are held (Name is the
	// first of them).
	Held []string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %q until %s", e.Name, e.Holder, e.ExpiresAt.Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// problemOf turns a non-success answer into an *APIError. The body is decoded as a problem
// when it is one; anything else (a proxy's HTML page) keeps its first line as the detail.
func problemOf(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var p wire.Problem
	if err := json.Unmarshal(body, &p); err == nil && p.Code != "" {
		e.Code = string(p.Code)
		e.Detail = deref(p.Detail)
		e.RequestID = deref(p.RequestId)
		e.Errors = deref(p.Errors)
		return e
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 200 {
		line = line[:200]
	}
	e.Detail = line
	return e
}

// invalid is a request the client refuses to send: it breaks a rule of the contract.
func invalid(op string, err error) error {
	msg := err.Error()
	var le *lease.Error
	if errors.As(err, &le) {
		msg = le.Message
	}
	return fmt.Errorf("%s: %w: %s", op, ErrInvalid, msg)
}

// unreachable marks a request that got no answer from the server.
func unreachable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
