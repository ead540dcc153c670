package client_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// TestFenceRefusesReaderToken runs the fence helpers against a real server (RW3): with the
// client's Modes, fence.Middleware and fence.Table refuse a reader's token with shared_token
// (ErrSharedToken, not stale) and report it, which the server records, while a writer's token
// with the same resources writes; the client looks the tokens up; and with the server out of
// reach the helpers refuse every token (fail closed) until it answers again.
func TestFenceRefusesReaderToken(t *testing.T) {
	url := newServer(t)
	px := newProxy(t, url)
	remember(t, px.URL, keyOf(url))
	c := newClient(t, px.URL)
	ctx := context.Background()

	r, err := c.Acquire(ctx, "cfg", client.AcquireOptions{TTL: 30 * time.Second, Shared: true})
	if err != nil {
		t.Fatalf("Acquire(shared) = %v", err)
	}
	reader := r.Token()
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := c.Acquire(ctx, "cfg", client.AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("Acquire(exclusive) = %v", err)
	}
	defer w.Release(ctx)
	writer := w.Token()
	if info, err := c.Token(ctx, reader); err != nil || !info.Shared || info.Name != "cfg" || info.Slot != "cfg#0" {
		t.Errorf("Token(reader's) = %+v, %v; want shared, cfg#0", info, err)
	}
	if info, err := c.Token(ctx, writer); err != nil || info.Shared || info.Name != "cfg" || info.Slot != "" {
		t.Errorf("Token(writer's) = %+v, %v; want exclusive, cfg", info, err)
	}
	if _, err := c.Token(ctx, writer+1e9); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Token(never issued) = %v, want ErrNotFound", err)
	}

	modes := c.Modes(0)
	reporter := c.Reporter()
	report := func(ctx context.Context, rej fence.Rejection) {
		if err := reporter.Report(ctx, rej); err != nil {
			t.Errorf("Report(%+v) = %v", rej, err)
		}
	}
	var marks fence.Memory
	mw := fence.Middleware(&marks, fence.WithModes(modes), fence.WithOnReject(report))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	put := func(token int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPut, "/files/cfg", nil)
		req.Header.Set(fence.Header, strconv.FormatInt(token, 10))
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, req)
		return rec
	}
	if rec := put(reader); rec.Code != http.StatusConflict || !bodyHas(rec, `"code":"shared_token"`) {
		t.Errorf("middleware, reader's token = %d %s; want 409 shared_token", rec.Code, rec.Body)
	}
	if rec := put(writer); rec.Code != http.StatusNoContent {
		t.Errorf("middleware, writer's token = %d %s; want 204", rec.Code, rec.Body)
	}

	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE config (name TEXT PRIMARY KEY, value TEXT NOT NULL, fence INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tbl := fence.Table{Name: "config", KeyColumn: "name", FenceColumn: "fence", Lease: "cfg", Modes: modes, OnReject: report}
	if err := tbl.Upsert(ctx, db, "db-url", writer, map[string]any{"value": "by the writer"}); err != nil {
		t.Fatalf("Table, writer's token = %v", err)
	}
	err = tbl.Upsert(ctx, db, "db-url", reader, map[string]any{"value": "by a reader"})
	if !errors.Is(err, fence.ErrSharedToken) || !errors.Is(err, client.ErrSharedToken) || errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("Table, reader's token = %v; want ErrSharedToken", err)
	}
	var value string
	if err := db.QueryRow(`SELECT value FROM config WHERE name = 'db-url'`).Scan(&value); err != nil || value != "by the writer" {
		t.Errorf("value = %q, %v; want the writer's", value, err)
	}
	if _, err := c.PutResource(ctx, "cfg-file", reader, []byte("v"), client.PutOptions{}); !errors.Is(err, client.ErrSharedToken) {
		t.Errorf("PutResource(reader's token) = %v; want ErrSharedToken, as the fence helpers answer", err)
	}

	ac, err := api.NewClientWithResponses(url, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+keyOf(url))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"/files/cfg", "db-url"} {
		resp, err := ac.ListRejectionsWithResponse(ctx, &api.ListRejectionsParams{Resource: &res})
		if err != nil || resp.JSON200 == nil || len(resp.JSON200.Rejections) != 1 || resp.JSON200.Rejections[0].PresentedToken != reader {
			t.Errorf("ListRejections(%s) = %v %s, %v; want the reader's refused write", res, resp.Status(), resp.Body, err)
		}
	}

	// The server out of reach: a token the cache has not seen is refused, never let through.
	px.failing.Store(true)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tbl.Upsert(lctx, db, "db-url", writer+1, map[string]any{"value": "unchecked"}); !errors.Is(err, fence.ErrModeUnknown) {
		t.Errorf("Table with the server out of reach = %v; want ErrModeUnknown", err)
	}
	if rec := put(writer + 1); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("middleware with the server out of reach = %d %s; want 503", rec.Code, rec.Body)
	}
	// What the cache knows needs no server.
	if shared, err := modes.Shared(ctx, reader); err != nil || !shared {
		t.Errorf("Modes, a cached reader's token with the server out of reach = %v, %v; want true", shared, err)
	}
	if err := tbl.Upsert(ctx, db, "db-url", writer, map[string]any{"value": "again"}); err != nil {
		t.Errorf("Table, a cached writer's token with the server out of reach = %v", err)
	}
}

func bodyHas(rec *httptest.ResponseRecorder, s string) bool {
	return strings.Contains(rec.Body.String(), s)
}
