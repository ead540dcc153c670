package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
	"github.com/leasekeeper/leasekeeper/wire"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newStrict returns the strict server itself, to call its methods without HTTP.
func newStrict(t *testing.T) (*server, *lease.FakeClock) {
	t.Helper()
	clock := lease.NewFakeClock(t0)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &server{store: st, acquirer: noLine{st}, clock: clock, limits: lease.DefaultLimits(),
		log: slog.New(slog.DiscardHandler), metrics: metrics.New(prometheus.NewRegistry(), st), auth: newAuthn(AuthConfig{}, st, clock)}, clock
}

func TestStrictAcquireLease(t *testing.T) {
	s, clock := newStrict(t)
	ctx := context.Background()
	req := func(holder string, ttl int64) api.AcquireLeaseRequestObject {
		return api.AcquireLeaseRequestObject{Name: "job", Body: &api.AcquireRequest{Holder: holder, TtlMs: ttl}}
	}
	t.Run("OK", func(t *testing.T) {
		resp, err := s.AcquireLease(ctx, req("w1", 10000))
		ok, isOK := resp.(wire.LeaseAnswer)
		if err != nil || !isOK {
			t.Fatalf("AcquireLease() = %T, %v; want 200", resp, err)
		}
		if ok.Body.Token != t0.UnixMicro() || ok.Body.LeaseId == nil {
			t.Errorf("AcquireLease() = %+v; want the token %d and a lease_id", ok.Body, t0.UnixMicro())
		}
	})
	t.Run("ErrHeld", func(t *testing.T) {
		clock.Advance(1001 * time.Millisecond)
		resp, err := s.AcquireLease(ctx, req("w2", 10000))
		held, ok := resp.(api.AcquireLease409ApplicationProblemPlusJSONResponse)
		if err != nil || !ok {
			t.Fatalf("AcquireLease(held) = %T, %v; want the typed 409", resp, err)
		}
		if held.Headers.RetryAfter == nil || *held.Headers.RetryAfter != 9 || held.Body.Code != api.ProblemCodeLeaseHeld || *held.Body.Holder != "w1" {
			t.Errorf("AcquireLease(held) = Retry-After %v, %+v; want 9 s and w1", held.Headers.RetryAfter, held.Body)
		}
	})
	t.Run("ErrInvalidNoBody", func(t *testing.T) {
		resp, err := s.AcquireLease(ctx, api.AcquireLeaseRequestObject{Name: "job"})
		p, ok := resp.(api.AcquireLeasedefaultApplicationProblemPlusJSONResponse)
		if err != nil || !ok || p.StatusCode != http.StatusBadRequest || p.Body.Code != api.ProblemCodeInvalidRequest {
			t.Errorf("AcquireLease(no body) = %#v, %v; want 400 invalid_request", resp, err)
		}
	})
	t.Run("ErrInvalidName", func(t *testing.T) {
		// The validator middleware is not in front of a direct call: the handler checks too.
		resp, err := s.AcquireLease(ctx, api.AcquireLeaseRequestObject{Name: "a/b", Body: &api.AcquireRequest{Holder: "w", TtlMs: 5000}})
		p, ok := resp.(api.AcquireLeasedefaultApplicationProblemPlusJSONResponse)
		if err != nil || !ok || p.StatusCode != http.StatusBadRequest {
			t.Errorf("AcquireLease(a/b) = %#v, %v; want 400", resp, err)
		}
	})
}

func TestStrictRenewReleaseRevoke(t *testing.T) {
	s, _ := newStrict(t)
	ctx := context.Background()
	resp, _ := s.AcquireLease(ctx, api.AcquireLeaseRequestObject{Name: "job", Body: &api.AcquireRequest{Holder: "w1", TtlMs: 10000}})
	l := resp.(wire.LeaseAnswer).Body
	rn, err := s.RenewLease(ctx, api.RenewLeaseRequestObject{Name: "job", Body: &api.RenewRequest{LeaseId: *l.LeaseId}})
	if r, ok := rn.(wire.LeaseAnswer); err != nil || !ok || r.Body.Token != l.Token {
		t.Errorf("RenewLease() = %#v, %v", rn, err)
	}
	rl, err := s.ReleaseLease(ctx, api.ReleaseLeaseRequestObject{Name: "job", Body: &api.ReleaseRequest{LeaseId: *l.LeaseId}})
	if _, ok := rl.(api.ReleaseLease204Response); err != nil || !ok {
		t.Errorf("ReleaseLease() = %#v, %v", rl, err)
	}
	rn, err = s.RenewLease(ctx, api.RenewLeaseRequestObject{Name: "job", Body: &api.RenewRequest{LeaseId: *l.LeaseId}})
	if p, ok := rn.(api.RenewLeasedefaultApplicationProblemPlusJSONResponse); err != nil || !ok || p.StatusCode != http.StatusConflict || p.Body.Code != api.ProblemCodeLeaseLost {
		t.Errorf("RenewLease(released) = %#v, %v; want 409 lease_lost", rn, err)
	}
	rv, err := s.RevokeLease(ctx, api.RevokeLeaseRequestObject{Name: "never"})
	if p, ok := rv.(api.RevokeLeasedefaultApplicationProblemPlusJSONResponse); err != nil || !ok || p.StatusCode != http.StatusNotFound {
		t.Errorf("RevokeLease(never) = %#v, %v; want 404", rv, err)
	}
}

func TestToProblem(t *testing.T) {
	s, _ := newStrict(t)
	ctx := context.WithValue(context.Background(), requestKey{}, &reqInfo{id: "req-1"})
	tests := []struct {
		name   string
		err    error
		status int
		code   api.ProblemCode
	}{
		{"Invalid", lease.Errorf(lease.CodeInvalid, "bad"), 400, api.ProblemCodeInvalidRequest},
		{"NotFound", fmt.Errorf("get: %w", lease.Errorf(lease.CodeNotFound, "no")), 404, api.ProblemCodeNotFound},
		{"Lost", lease.Errorf(lease.CodeLost, "gone"), 409, api.ProblemCodeLeaseLost},
		{"Stale", lease.Errorf(lease.CodeStale, "old"), 409, api.ProblemCodeStaleToken},
		{"Precondition", lease.Errorf(lease.CodePrecondition, "token"), 428, api.ProblemCodePreconditionRequired},
		{"TooManyWaiters", lease.Errorf(lease.CodeTooManyWaiters, "full"), 429, api.ProblemCodeTooManyWaiters},
		{"TooLarge", &http.MaxBytesError{Limit: 10}, 413, api.ProblemCodePayloadTooLarge},
		{"Unavailable", lease.Errorf(lease.CodeUnavailable, "busy"), 503, api.ProblemCodeUnavailable},
		{"Internal", errors.New("open /secret/path.db: disk I/O error"), 500, api.ProblemCodeInternal},
		{"UnknownCode", lease.Errorf("weird", "x"), 500, "weird"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := s.toProblem(ctx, tt.err)
			if p.Status != tt.status || p.Code != tt.code || p.RequestId == nil || *p.RequestId != "req-1" {
				t.Errorf("toProblem(%v) = %d %q (request id %v), want %d %q", tt.err, p.Status, p.Code, p.RequestId, tt.status, tt.code)
			}
			if tt.code == api.ProblemCodeInternal && strings.Contains(*p.Detail, "secret") {
				t.Errorf("toProblem(internal) detail %q leaks the cause", *p.Detail)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{{-time.Hour, 1}, {0, 1}, {time.Nanosecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2}, {59500 * time.Millisecond, 60}} {
		if got := retryAfter(tt.d); got != tt.want {
			t.Errorf("retryAfter(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestRequestError(t *testing.T) {
	s, _ := newStrict(t)
	for _, tt := range []struct {
		name   string
		err    error
		status int
	}{
		{"MissingFencingToken", &api.RequiredHeaderError{ParamName: "Fencing-Token"}, http.StatusPreconditionRequired},
		{"OtherMissingHeader", &api.RequiredHeaderError{ParamName: "X-Other"}, http.StatusBadRequest},
		{"Decode", fmt.Errorf("can't decode JSON body: %w", errors.New("json: cannot unmarshal")), http.StatusBadRequest},
		{"TooLarge", &http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.requestError(w, httptest.NewRequest(http.MethodPost, "/v1/x", nil), tt.err)
			if w.Code != tt.status || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("requestError(%v) = %d %q, want %d problem+json", tt.err, w.Code, w.Header().Get("Content-Type"), tt.status)
			}
		})
	}
}

// TestMiddlewaresWithoutRequestInfo: authenticate and accessLog, composed without
// withRequestID before them, make the request's info themselves instead of dereferencing nil.
func TestMiddlewaresWithoutRequestInfo(t *testing.T) {
	s, _ := newStrict(t)
	s.auth = newAuthn(AuthConfig{Off: true}, s.store, s.clock)
	var got principalInfo
	h := s.accessLog(s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = infoOf(r.Context()).principal
		w.WriteHeader(http.StatusNoContent)
	})))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/leases", nil))
	if w.Code != http.StatusNoContent || got.p.Role != auth.Anonymous.Role {
		t.Errorf("status %d, principal %+v; want 204 and the anonymous admin of auth off", w.Code, got.p)
	}
}
