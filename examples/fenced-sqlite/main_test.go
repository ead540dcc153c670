package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeServer plays the leasekeeper endpoints the example calls.
type fakeServer struct {
	mu         sync.Mutex
	next       int64
	held       string // lease_id of the current lease, "" when free
	releases   int
	rejections []map[string]any
}

func (f *fakeServer) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/leases/{name}/acquire", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Holder string `json:"holder"`
			TTLMs  int64  `json:"ttl_ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Holder == "" || req.TTLMs <= 0 {
			t.Errorf("acquire body: %+v, %v", req, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.held != "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": "Conflict", "status": 409,
				"code": "lease_held", "holder": "someone", "expires_at": "2030-01-01T00:00:00.000Z"})
			return
		}
		f.next++
		f.held = "lk_" + strconv.FormatInt(f.next, 10)
		w.Header().Set("Fencing-Token", strconv.FormatInt(f.next*1000, 10))
		json.NewEncoder(w).Encode(map[string]any{"name": r.PathValue("name"), "holder": req.Holder,
			"token": f.next * 1000, "lease_id": f.held, "ttl_ms": req.TTLMs})
	})
	mux.HandleFunc("POST /v1/leases/{name}/release", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			LeaseID string `json:"lease_id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if req.LeaseID != f.held {
			t.Errorf("release with lease_id %q, want %q", req.LeaseID, f.held)
		}
		f.held = ""
		f.releases++
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/rejections", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.rejections = append(f.rejections, body)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

// snapshot returns the release count and the rejections received so far.
func (f *fakeServer) snapshot() (int, []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.releases, append([]map[string]any(nil), f.rejections...)
}

func (f *fakeServer) setHeld(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = id
}

func TestRun(t *testing.T) {
	fake := &fakeServer{}
	srv := httptest.NewServer(fake.handler(t))
	t.Cleanup(srv.Close)
	dbPath := filepath.Join(t.TempDir(), "demo.db")
	ctx := context.Background()
	common := []string{"-server", srv.URL, "-db", dbPath, "-name", "demo", "-holder", "tester"}

	runOK := func(t *testing.T, extra ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, append(common, extra...), &out, &errOut); err != nil {
			t.Fatalf("run(%v) = %v; stderr %s", extra, err, errOut.String())
		}
		return out.String()
	}

	t.Run("OK/AcquireWriteRelease", func(t *testing.T) {
		out := runOK(t, "-value", "one")
		if !strings.Contains(out, "acquired \"demo\": token 1000") || !strings.Contains(out, "wrote row \"demo\" with token 1000") {
			t.Errorf("output %q lacks the acquire and the write", out)
		}
		if releases, _ := fake.snapshot(); releases != 1 {
			t.Errorf("releases = %d, want 1", releases)
		}
	})

	t.Run("OK/SecondHolderHigherToken", func(t *testing.T) {
		runOK(t, "-value", "two")
	})

	t.Run("OK/EqualForcedToken", func(t *testing.T) {
		runOK(t, "-token", "2000", "-value", "three")
	})

	t.Run("ErrStale/Reported", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(common, "-token", "1000", "-value", "stale"), &out, &errOut)
		if !errors.Is(err, errStale) {
			t.Fatalf("run with a stale token = %v, want errStale", err)
		}
		want := []map[string]any{{
			"resource": "demo", "lease": "demo", "presented_token": float64(1000), "current_fence": float64(2000),
			"reason": "stale write to table kv in " + dbPath,
		}}
		_, got := fake.snapshot()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rejections reported (-want +got):\n%s", diff)
		}
	})

	t.Run("ErrLeaseHeld", func(t *testing.T) {
		fake.setHeld("lk_other")
		t.Cleanup(func() { fake.setHeld("") })
		var out, errOut bytes.Buffer
		err := run(ctx, common, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "lease_held") || !strings.Contains(err.Error(), "someone") {
			t.Fatalf("run while held = %v, want a lease_held error naming the holder", err)
		}
	})

	db, err := openDB(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var value string
	var f int64
	if err := db.QueryRow(`SELECT value, fence FROM kv WHERE name = 'demo'`).Scan(&value, &f); err != nil {
		t.Fatal(err)
	}
	if value != "three" || f != 2000 {
		t.Errorf("row = %q, fence %d; want \"three\", fence 2000", value, f)
	}
}
