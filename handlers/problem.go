package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/wire"
)

// codeCanceled is a request whose client left before the answer (e.g. a waiting acquire given
// up). No client reads it: it exists for the access log and the metrics.
const codeCanceled = wire.CodeCanceled

// problem is an RFC 9457 problem built from an error; Status and RetryAfter drive the headers.
type problem struct {
	api.Problem
	retryAfter int // seconds; 0 for none
}

// toProblem turns any error into a problem. Domain errors keep their code and message; any
// other error is logged with its cause and answered as a generic internal error.
func (s *server) toProblem(ctx context.Context, err error) problem {
	var le *lease.Error
	var tooBig *http.MaxBytesError
	var body *bodyError
	switch {
	case errors.As(err, &tooBig):
		le = lease.Errorf(lease.CodeTooLarge, "the request body is larger than %d bytes", tooBig.Limit)
	case errors.As(err, &body):
		// The client's failure, not the server's: worth a warning, never an error.
		le = body.problem()
		c := clientOf(ctx)
		s.log.WarnContext(ctx, "request body not received", "err", body.err, "method", c.method, "path", c.path,
			"remote", c.addr, "request_id", requestID(ctx))
	case errors.As(err, &le):
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		le = lease.Errorf(codeCanceled, "the client went away")
		s.log.DebugContext(ctx, "client went away", "err", err, "request_id", requestID(ctx))
	default:
		c := clientOf(ctx)
		s.log.ErrorContext(ctx, "internal error", "err", err, "method", c.method, "path", c.path, "request_id", requestID(ctx))
		le = lease.Errorf(lease.CodeInternal, "an internal error occurred; the server log has the details (request_id %s)", requestID(ctx))
	}
	status, ok := wire.Status(le.Code)
	if !ok {
		status = http.StatusInternalServerError
	}
	p := problem{Problem: api.Problem{
		Type:      "urn:leasekeeper:problem:" + string(le.Code),
		Title:     title(le.Code),
		Status:    status,
		Code:      api.ProblemCode(le.Code),
		Detail:    &le.Message,
		Instance:  ptr(clientOf(ctx).path),
		RequestId: ptr(requestID(ctx)),
	}}
	if len(le.Fields) > 0 {
		p.Errors = &le.Fields
	}
	switch le.Code {
	case lease.CodeHeld:
		p.Holder = ptr(le.Holder)
		if len(le.Held) > 0 {
			p.Held = &le.Held
		}
		p.ExpiresAt = wire.OptTime(le.ExpiresAt)
		p.AvailableAt = wire.OptTime(le.AvailableAt)
		until := le.AvailableAt
		if until.IsZero() {
			until = le.ExpiresAt
		}
		p.retryAfter = retryAfter(until.Sub(s.clock.Now()))
	case lease.CodeStale, lease.CodeNotIssued, lease.CodeSharedToken:
		p.PresentedToken = ptr(le.PresentedToken)
		p.CurrentFence = ptr(le.CurrentFence)
	case lease.CodeTooManyWaiters, lease.CodeTooManyWatchers, lease.CodeUnavailable, lease.CodeTooManyLeases, lease.CodeTooManySessions:
		p.retryAfter = 1
	case lease.CodeRateLimited:
		p.retryAfter = s.auth.gate.RetryAfterRate()
	}
	// Typed responses of the strict server carry only the headers their operation declares:
	// every answer that asks the client to come back says when, whatever carries it.
	if h := responseHeader(ctx); h != nil && p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	return p
}

// retryAfter rounds a wait up to whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

func title(c lease.Code) string {
	s := strings.ReplaceAll(string(c), "_", " ")
	return strings.ToUpper(s[:1]) + s[1:]
}

// problemAs is the strict server's default (any status) problem response of an operation:
// every one of them is this same struct under its own name.
func problemAs[T ~struct {
	Body       api.Problem
	StatusCode int
}](s *server, ctx context.Context, err error) T {
	p := s.toProblem(ctx, err)
	return T{Body: p.Problem, StatusCode: p.Status}
}

// writeProblem writes err as application/problem+json: the one writer of HTTP errors outside
// the typed responses of the strict server.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := s.toProblem(r.Context(), err)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	if err := json.NewEncoder(w).Encode(p.Problem); err != nil {
		s.log.DebugContext(r.Context(), "write problem", "err", err)
	}
}

// requestError answers a request the generated code could not decode: bad parameters or JSON.
// A missing Fencing-Token is 428 precondition_required.
func (s *server) requestError(w http.ResponseWriter, r *http.Request, err error) {
	var missing *api.RequiredHeaderError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &missing) && strings.EqualFold(missing.ParamName, "Fencing-Token"):
		err = lease.Errorf(lease.CodePrecondition, "a fenced write needs a Fencing-Token header")
	case errors.As(err, &tooBig):
	default:
		err = lease.Errorf(lease.CodeInvalid, "%s", cleanDecodeError(err))
	}
	s.writeProblem(w, r, err)
}

// responseError answers when a response could not be produced or written.
func (s *server) responseError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeProblem(w, r, err)
}

// cleanDecodeError keeps a decoding error's message useful without leaking Go type names.
func cleanDecodeError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type (got a JSON %s)", typ.Field, typ.Value)
	}
	msg := err.Error()
	if i := strings.Index(msg, ": json: "); i >= 0 {
		msg = msg[:i] + ": " + msg[i+len(": json: "):]
	}
	return msg
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
