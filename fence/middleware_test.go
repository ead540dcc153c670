package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/fence"
)

// seen records what the wrapped handler saw.
type seen struct {
	called bool
	token  int64
	ok     bool
}

func okHandler(s *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.token, s.ok = fence.TokenFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
}

func problemBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("decode problem %q: %v", rec.Body.String(), err)
	}
	return body
}

func TestMiddleware(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		tokens     []string // Fencing-Token header values; nil for none
		wantStatus int
		wantCode   string // problem code; "" when the handler answers
		wantSeen   seen   // what the handler saw
		wantMark   int64  // the mark on /acct/1 afterwards
		wantBody   bool   // compare the full 409 body
	}{
		{name: "OK/EqualToken", method: http.MethodPut, path: "/acct/1", tokens: []string{"100"},
			wantStatus: http.StatusNoContent, wantSeen: seen{true, 100, true}, wantMark: 100},
		{name: "OK/HigherToken", method: http.MethodPost, path: "/acct/1", tokens: []string{"101"},
			wantStatus: http.StatusNoContent, wantSeen: seen{true, 101, true}, wantMark: 101},
		{name: "OK/LeadingZeros", method: http.MethodPatch, path: "/acct/1", tokens: []string{"0000101"},
			wantStatus: http.StatusNoContent, wantSeen: seen{true, 101, true}, wantMark: 101},
		{name: "OK/MaxToken", method: http.MethodDelete, path: "/acct/1", tokens: []string{"9007199254740991"},
			wantStatus: http.StatusNoContent, wantSeen: seen{true, 9007199254740991, true}, wantMark: 9007199254740991},
		{name: "OK/OtherKeyIndependent", method: http.MethodPut, path: "/acct/2", tokens: []string{"1"},
			wantStatus: http.StatusNoContent, wantSeen: seen{true, 1, true}, wantMark: 100},
		{name: "PassThrough/GETWithoutToken", method: http.MethodGet, path: "/acct/1",
			wantStatus: http.StatusNoContent, wantSeen: seen{called: true}, wantMark: 100},
		{name: "PassThrough/GETWithStaleToken", method: http.MethodGet, path: "/acct/1", tokens: []string{"1"},
			wantStatus: http.StatusNoContent, wantSeen: seen{called: true}, wantMark: 100},
		{name: "PassThrough/HEAD", method: http.MethodHead, path: "/acct/1",
			wantStatus: http.StatusNoContent, wantSeen: seen{called: true}, wantMark: 100},
		{name: "ErrStale", method: http.MethodPut, path: "/acct/1", tokens: []string{"99"},
			wantStatus: http.StatusConflict, wantCode: "stale_token", wantMark: 100, wantBody: true},
		{name: "ErrMissing", method: http.MethodPut, path: "/acct/1",
			wantStatus: http.StatusPreconditionRequired, wantCode: "precondition_required", wantMark: 100},
		{name: "ErrMalformed/Empty", method: http.MethodPut, path: "/acct/1", tokens: []string{""},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Letters", method: http.MethodPut, path: "/acct/1", tokens: []string{"abc"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Negative", method: http.MethodPut, path: "/acct/1", tokens: []string{"-5"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Plus", method: http.MethodPut, path: "/acct/1", tokens: []string{"+200"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/TwoPow53", method: http.MethodPut, path: "/acct/1", tokens: []string{"9007199254740992"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Overflow", method: http.MethodPut, path: "/acct/1", tokens: []string{"99999999999999999999999"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Float", method: http.MethodPut, path: "/acct/1", tokens: []string{"1e3"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Hex", method: http.MethodPut, path: "/acct/1", tokens: []string{"0x200"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/List", method: http.MethodPut, path: "/acct/1", tokens: []string{"200, 300"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/Space", method: http.MethodPut, path: "/acct/1", tokens: []string{"2 00"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
		{name: "ErrMalformed/TwoHeaders", method: http.MethodPut, path: "/acct/1", tokens: []string{"200", "300"},
			wantStatus: http.StatusBadRequest, wantCode: "invalid_request", wantMark: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hw fence.Memory
			if _, err := hw.Advance(context.Background(), "/acct/1", 100); err != nil {
				t.Fatal(err)
			}
			var s seen
			h := fence.Middleware(&hw)(okHandler(&s))
			req := httptest.NewRequest(tt.method, tt.path, nil)
			for _, v := range tt.tokens {
				req.Header.Add(fence.Header, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", rec.Code, tt.wantStatus, rec.Body)
			}
			if diff := cmp.Diff(tt.wantSeen, s, cmp.AllowUnexported(seen{})); diff != "" {
				t.Errorf("handler saw (-want +got):\n%s", diff)
			}
			if got, _ := hw.Mark("/acct/1"); got != tt.wantMark {
				t.Errorf("mark = %d, want %d", got, tt.wantMark)
			}
			if tt.wantCode == "" {
				return
			}
			body := problemBody(t, rec)
			if body["code"] != tt.wantCode || body["status"] != float64(tt.wantStatus) || body["type"] == nil || body["title"] == nil {
				t.Errorf("problem = %v, want code %q, status %d, a type and a title", body, tt.wantCode, tt.wantStatus)
			}
			if tt.wantBody {
				want := map[string]any{
					"type":            "about:blank",
					"title":           "Conflict",
					"status":          float64(409),
					"code":            "stale_token",
					"detail":          "fencing token 99 is below the current fence 100",
					"presented_token": float64(99),
					"current_fence":   float64(100),
				}
				if diff := cmp.Diff(want, body); diff != "" {
					t.Errorf("409 body (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestMiddlewareOptions(t *testing.T) {
	t.Run("OK/CustomKeyAndMethods", func(t *testing.T) {
		var hw fence.Memory
		var s seen
		h := fence.Middleware(&hw,
			fence.WithKey(func(r *http.Request) string { return r.URL.Query().Get("acct") }),
			fence.WithMethods(http.MethodGet),
		)(okHandler(&s))
		req := httptest.NewRequest(http.MethodGet, "/x?acct=7", nil)
		req.Header.Set(fence.Header, "42")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent || !s.ok || s.token != 42 {
			t.Fatalf("status %d, handler saw %+v, want 204 and token 42", rec.Code, s)
		}
		if got, ok := hw.Mark("7"); !ok || got != 42 {
			t.Errorf("Mark(7) = %d, %v, want 42, true", got, ok)
		}
		// PUT is no longer a checked method.
		s = seen{}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/x?acct=7", nil))
		if rec.Code != http.StatusNoContent || !s.called || s.ok {
			t.Errorf("unchecked PUT: status %d, handler saw %+v, want 204 and no token", rec.Code, s)
		}
	})

	t.Run("ErrEmptyKey", func(t *testing.T) {
		var s seen
		h := fence.Middleware(&fence.Memory{}, fence.WithKey(func(*http.Request) string { return "" }))(okHandler(&s))
		req := httptest.NewRequest(http.MethodPut, "/x", nil)
		req.Header.Set(fence.Header, "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || s.called {
			t.Fatalf("status %d, handler called %v, want 400 and not called", rec.Code, s.called)
		}
		if body := problemBody(t, rec); body["code"] != "invalid_request" {
			t.Errorf("code = %v, want invalid_request", body["code"])
		}
	})

	t.Run("ErrHighWaterFailed", func(t *testing.T) {
		var logged []error
		var s seen
		h := fence.Middleware(failingHW{errors.New("db down: secret detail")},
			fence.WithErrorLog(func(_ *http.Request, err error) { logged = append(logged, err) }),
		)(okHandler(&s))
		req := httptest.NewRequest(http.MethodPut, "/x", nil)
		req.Header.Set(fence.Header, "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError || s.called {
			t.Fatalf("status %d, handler called %v, want 500 and not called", rec.Code, s.called)
		}
		body := problemBody(t, rec)
		if body["code"] != "internal" {
			t.Errorf("code = %v, want internal", body["code"])
		}
		if d, _ := body["detail"].(string); d == "" || d == "db down: secret detail" {
			t.Errorf("detail = %q, want a generic message", d)
		}
		if len(logged) != 1 {
			t.Errorf("logged %v, want one error", logged)
		}
	})

	t.Run("ErrStale/OnReject", func(t *testing.T) {
		var hw fence.Memory
		var got []fence.Rejection
		h := fence.Middleware(&hw, fence.WithOnReject(func(_ context.Context, r fence.Rejection) { got = append(got, r) }))(okHandler(&seen{}))
		for _, tc := range []struct{ token, lease string }{{"10", ""}, {"9", "billing"}, {"8", "bad name/with slash"}} {
			req := httptest.NewRequest(http.MethodPut, "/acct/1", nil)
			req.Header.Set(fence.Header, tc.token)
			if tc.lease != "" {
				req.Header.Set("Lease-Name", tc.lease)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		want := []fence.Rejection{
			{Resource: "/acct/1", Lease: "billing", PresentedToken: 9, CurrentFence: 10, Reason: "stale token on PUT /acct/1"},
			{Resource: "/acct/1", PresentedToken: 8, CurrentFence: 10, Reason: "stale token on PUT /acct/1"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rejections (-want +got):\n%s", diff)
		}
	})

	t.Run("ErrStale/ForeignHighWater", func(t *testing.T) {
		// A HighWater that wraps ErrStale without a *StaleTokenError still
		// yields a 409 with the current value it returned.
		h := fence.Middleware(staleHW{current: 77})(okHandler(&seen{}))
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		req.Header.Set(fence.Header, "5")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := problemBody(t, rec)
		if rec.Code != http.StatusConflict || body["current_fence"] != float64(77) || body["presented_token"] != float64(5) {
			t.Errorf("status %d, body %v, want 409 with current_fence 77 and presented_token 5", rec.Code, body)
		}
	})
}

// TestMiddlewareServer goes through a real HTTP server, where header parsing
// and trimming are the net/http server's.
func TestMiddlewareServer(t *testing.T) {
	var hw fence.Memory
	srv := httptest.NewServer(fence.Middleware(&hw)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.TokenFromContext(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]int64{"token": tok})
	})))
	t.Cleanup(srv.Close)

	tests := []struct {
		name       string
		token      string
		wantStatus int
	}{
		{"OK", "5", http.StatusOK},
		{"OK/Equal", "5", http.StatusOK},
		{"ErrStale", "4", http.StatusConflict},
		{"ErrMalformed", "x", http.StatusBadRequest},
		{"ErrMissing", "", http.StatusPreconditionRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/r", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.token != "" {
				req.Header.Set(fence.Header, tt.token)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("PUT with token %q: status %d, want %d", tt.token, resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

// TestMiddlewareSerialize checks that with Serialize a second request for the
// same key waits until the first one's handler returns.
func TestMiddlewareSerialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hw := &countingHW{}
		release := make(chan struct{})
		var order []int64
		var mu sync.Mutex
		h := fence.Middleware(hw, fence.Serialize())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, _ := fence.TokenFromContext(r.Context())
			if tok == 5 {
				<-release
			}
			mu.Lock()
			order = append(order, tok)
			mu.Unlock()
		}))
		serve := func(ctx context.Context, token string) *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(ctx, http.MethodPut, "/k", nil)
			req.Header.Set(fence.Header, token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		var wg sync.WaitGroup
		wg.Go(func() { serve(context.Background(), "5") })
		synctest.Wait()
		wg.Go(func() { serve(context.Background(), "6") })
		synctest.Wait()
		if n := hw.calls(); n != 1 {
			t.Fatalf("Advance called %d times while the first handler runs, want 1", n)
		}

		// A waiter that gives up is answered 503 and never checked.
		ctx, cancel := context.WithCancel(context.Background())
		var gaveUp *httptest.ResponseRecorder
		wg.Go(func() { gaveUp = serve(ctx, "7") })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if gaveUp.Code != http.StatusServiceUnavailable {
			t.Errorf("abandoned request: status %d, want 503", gaveUp.Code)
		}

		close(release)
		wg.Wait()
		if diff := cmp.Diff([]int64{5, 6}, order); diff != "" {
			t.Errorf("handler order (-want +got):\n%s", diff)
		}
		if n := hw.calls(); n != 2 {
			t.Errorf("Advance called %d times, want 2", n)
		}
	})
}

type failingHW struct{ err error }

func (f failingHW) Advance(context.Context, string, int64) (int64, error) { return 0, f.err }

type staleHW struct{ current int64 }

func (s staleHW) Advance(context.Context, string, int64) (int64, error) {
	return s.current, fmtErr{fence.ErrStaleToken}
}

// fmtErr wraps an error without being a *StaleTokenError.
type fmtErr struct{ err error }

func (e fmtErr) Error() string { return "wrapped: " + e.err.Error() }
func (e fmtErr) Unwrap() error { return e.err }

type countingHW struct {
	mu  sync.Mutex
	n   int
	mem fence.Memory
}

func (c *countingHW) Advance(ctx context.Context, key string, token int64) (int64, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.mem.Advance(ctx, key, token)
}

func (c *countingHW) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
