package main

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestOpenStorePoolSize: -db-max-conns sizes a replica's pool, its default is the store's, and
// the URL's pool_max_conns wins.
func TestOpenStorePoolSize(t *testing.T) {
	url := pg.NewDatabase(t)
	for _, tt := range []struct {
		url      string
		maxConns int
		want     int
	}{
		{url, 0, postgres.DefaultMaxConns},
		{url, 24, 24},
		{url + "&pool_max_conns=3", 24, 3},
	} {
		var hooks service.Hooks
		st, err := openStore(context.Background(), tt.url, tt.maxConns, &hooks, false, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		got := st.(*postgres.Store).MaxConns()
		st.Close()
		if got != tt.want {
			t.Errorf("openStore(%q, %d): a pool of %d, want %d", tt.url, tt.maxConns, got, tt.want)
		}
	}
}

// TestServePostgresReplicas runs the real run() twice on one PostgreSQL database, as two
// replicas: a name held through one is held for the other; a waiter on one is granted when the
// holder releases through the other; a watcher on one sees the other's events.
func TestServePostgresReplicas(t *testing.T) {
	url := pg.NewDatabase(t)
	secret := filepath.Join(t.TempDir(), "secret")
	args := []string{"--addr", "127.0.0.1:0", "--db", url, "--secret-file", secret}
	a := serveInProcess(t, nil, args...)
	b := serveInProcess(t, map[string]string{"LEASEKEEPER_DB": url}, "--addr", "127.0.0.1:0", "--secret-file", secret)
	ctx := context.Background()

	// A watcher on b, open before anything happens on a.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	req, _ := http.NewRequestWithContext(wctx, http.MethodGet, b.url+"/v1/watch?prefix=job", nil)
	resp, err := http.DefaultClient.Do(withKey(req)) // no client timeout: a stream
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/watch on b = %v, %v", resp, err)
	}
	defer resp.Body.Close()
	seen := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				seen <- sc.Text()
			}
		}
		close(seen)
	}()

	first, err := a.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "on-a", TtlMs: 30000})
	if err != nil || first.JSON200 == nil {
		t.Fatalf("AcquireLease(a) = %v, %v", first.Status(), err)
	}
	held, err := b.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "on-b", TtlMs: 30000})
	if err != nil || held.StatusCode() != http.StatusConflict {
		t.Fatalf("AcquireLease(b) while a's holder holds it = %v, %v; want 409", held.Status(), err)
	}
	waited := make(chan *api.AcquireLeaseResponse, 1)
	go func() {
		r, err := b.c.AcquireLeaseWithResponse(ctx, "job", nil, api.AcquireRequest{Holder: "waiter-on-b", TtlMs: 30000, WaitMs: ptrTo[int64](20000)})
		if err != nil {
			t.Errorf("AcquireLease(b, wait) = %v", err)
		}
		waited <- r
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is in b's line
	rel, err := a.c.ReleaseLeaseWithResponse(ctx, "job", api.ReleaseRequest{LeaseId: *first.JSON200.LeaseId})
	if err != nil || rel.StatusCode() != http.StatusNoContent {
		t.Fatalf("ReleaseLease(a) = %v, %v", rel.Status(), err)
	}
	start := time.Now()
	select {
	case r := <-waited:
		if r == nil || r.JSON200 == nil || r.JSON200.Token <= first.JSON200.Token {
			t.Fatalf("waiter on b = %v; want a grant with a larger token", r)
		}
		// Woken by a's NOTIFY, not by a poll or a timeout.
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("waiter on b granted %v after the release on a, want promptly", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("waiter on b not granted 15 s after the release on a")
	}

	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case line := <-seen:
			got = append(got, line)
		case <-timeout:
			t.Fatalf("watcher on b saw %q, want a's acquired and released and b's acquired", got)
		}
	}
	for i, want := range []string{`"acquired"`, `"released"`, `"acquired"`} {
		if !strings.Contains(got[i], want) {
			t.Errorf("watch event %d on b = %s, want %s", i, got[i], want)
		}
	}
	if !strings.Contains(got[0], "on-a") {
		t.Errorf("first watch event on b = %s, want a's acquire", got[0])
	}
}

func withKey(r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+testAdminKey)
	return r
}
