package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/fence"
)

// fakeRejections is a stand-in for leasekeeper's POST /v1/rejections.
type fakeRejections struct {
	mu     sync.Mutex
	bodies []map[string]any
	status int
}

func (f *fakeRejections) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/rejections" {
		http.Error(w, "wrong route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	status := f.status
	f.mu.Unlock()
	if status == 0 {
		status = http.StatusAccepted
	}
	if status != http.StatusAccepted {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		io.WriteString(w, `{"type":"about:blank","title":"Bad Request","status":400,"code":"invalid_request","detail":"resource too long"}`)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, `{"id":1}`)
}

func (f *fakeRejections) got() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func TestReporterReport(t *testing.T) {
	tests := []struct {
		name     string
		rej      fence.Rejection
		status   int
		wantBody map[string]any // nil when nothing should reach the server
		wantErr  string         // substring; "" for success
	}{
		{
			name: "OK/AllFields",
			rej:  fence.Rejection{Resource: "acct-1", Lease: "billing", PresentedToken: 5, CurrentFence: 9, Reason: "stale"},
			wantBody: map[string]any{"resource": "acct-1", "lease": "billing", "presented_token": float64(5),
				"current_fence": float64(9), "reason": "stale"},
		},
		{
			name:     "OK/OptionalFieldsOmitted",
			rej:      fence.Rejection{Resource: "acct-1", PresentedToken: 0, CurrentFence: 1},
			wantBody: map[string]any{"resource": "acct-1", "presented_token": float64(0), "current_fence": float64(1)},
		},
		{
			name:     "ErrStatus",
			rej:      fence.Rejection{Resource: "acct-1", PresentedToken: 1, CurrentFence: 2},
			status:   http.StatusBadRequest,
			wantBody: map[string]any{"resource": "acct-1", "presented_token": float64(1), "current_fence": float64(2)},
			wantErr:  "400 Bad Request: invalid_request: resource too long",
		},
		{
			name:    "ErrEmptyResource",
			rej:     fence.Rejection{PresentedToken: 1, CurrentFence: 2},
			wantErr: "empty resource",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeRejections{status: tt.status}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			r := &fence.Reporter{BaseURL: srv.URL + "/", Client: srv.Client()}
			err := r.Report(context.Background(), tt.rej)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Report = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Report = %v, want an error containing %q", err, tt.wantErr)
			}
			var want []map[string]any
			if tt.wantBody != nil {
				want = []map[string]any{tt.wantBody}
			}
			if diff := cmp.Diff(want, fake.got()); diff != "" {
				t.Errorf("bodies received (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReporterTimeout(t *testing.T) {
	unblock := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-unblock:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(unblock) })

	r := &fence.Reporter{BaseURL: srv.URL, Client: srv.Client(), Timeout: 50 * time.Millisecond}
	start := time.Now()
	err := r.Report(context.Background(), fence.Rejection{Resource: "x", PresentedToken: 1, CurrentFence: 2})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Report to a hung server = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Report took %v, want about the 50ms timeout", d)
	}
}

func TestReporterAsync(t *testing.T) {
	arrived := make(chan struct{}, 4)
	unblock := make(chan struct{})
	fake := &fakeRejections{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-unblock
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var failed []error
	done := make(chan struct{}, 4)
	r := &fence.Reporter{BaseURL: srv.URL, Client: srv.Client()}
	async := r.Async(1, func(_ fence.Rejection, err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
		done <- struct{}{}
	})

	// The request that was refused has ended: the report must still go out.
	ctx, cancel := context.WithCancel(context.Background())
	async.Report(ctx, fence.Rejection{Resource: "first", PresentedToken: 1, CurrentFence: 2})
	cancel()
	<-arrived
	// The only slot is busy, so this one is dropped, without waiting.
	async.Report(context.Background(), fence.Rejection{Resource: "second", PresentedToken: 1, CurrentFence: 2})
	<-done
	mu.Lock()
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), "dropped") {
		t.Errorf("errors after overflow = %v, want one drop", failed)
	}
	mu.Unlock()

	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := async.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush while a report hangs = %v, want context.DeadlineExceeded", err)
	}
	close(unblock)
	if err := async.Flush(context.Background()); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	want := []map[string]any{{"resource": "first", "presented_token": float64(1), "current_fence": float64(2)}}
	if diff := cmp.Diff(want, fake.got()); diff != "" {
		t.Errorf("reports received by the time Flush returned (-want +got):\n%s", diff)
	}
	if err := async.Flush(context.Background()); err != nil {
		t.Errorf("Flush with nothing in flight = %v", err)
	}
}

func TestReporterHeaders(t *testing.T) {
	tests := []struct {
		name             string
		r                fence.Reporter
		wantUA, wantAuth string
	}{
		{"Default", fence.Reporter{}, fence.DefaultUserAgent, ""},
		{"Set", fence.Reporter{UserAgent: "billing/2.0", APIKey: "lk_secret"}, "billing/2.0", "Bearer lk_secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan http.Header, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
				w.WriteHeader(http.StatusAccepted)
			}))
			t.Cleanup(srv.Close)
			r := tt.r
			r.BaseURL, r.Client = srv.URL, srv.Client()
			if err := r.Report(context.Background(), fence.Rejection{Resource: "x", PresentedToken: 1, CurrentFence: 2}); err != nil {
				t.Fatalf("Report = %v", err)
			}
			h := <-got
			if diff := cmp.Diff([]string{tt.wantUA, tt.wantAuth}, []string{h.Get("User-Agent"), h.Get("Authorization")}); diff != "" {
				t.Errorf("User-Agent and Authorization (-want +got):\n%s", diff)
			}
		})
	}
}
