package client_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// pausing is a database whose writes first run pause: the process stops between sending a
// write and the database seeing it, long enough for its lease to pass to somebody else.
type pausing struct {
	*sql.DB
	pause func()
}

func (p pausing) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if p.pause != nil {
		p.pause()
	}
	return p.DB.ExecContext(ctx, q, args...)
}

// TestStaleWriteUnderLostLeaseIsReported writes through fence.Table under Do's lease
// context while the lease passes to another holder mid-write (the context ends during the
// write), and checks the write is refused as stale, Do's error says why, and the server's
// rejection log shows it with the lease name and the client's User-Agent.
func TestStaleWriteUnderLostLeaseIsReported(t *testing.T) {
	url := newServer(t)
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE ledger (name TEXT PRIMARY KEY, balance INTEGER NOT NULL, fence INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	late := newClient(t, url, client.WithUserAgent("late-writer/1.0"))
	other := newClient(t, url)
	reporter := late.Reporter()
	ledger := fence.Table{Name: "ledger", KeyColumn: "name", FenceColumn: "fence", Lease: "billing",
		OnReject: func(ctx context.Context, r fence.Rejection) {
			if err := reporter.Report(ctx, r); err != nil {
				t.Errorf("Report = %v", err)
			}
		}}
	ctx := context.Background()

	err = client.Do(ctx, late, "billing", client.AcquireOptions{TTL: 30 * time.Second}, func(ctx context.Context, token int64) error {
		paused := pausing{DB: db, pause: func() {
			// While paused: the lease is revoked and granted to another holder, who writes.
			if err := other.Revoke(context.Background(), "billing"); err != nil {
				t.Errorf("Revoke = %v", err)
			}
			next, err := other.Acquire(context.Background(), "billing", client.AcquireOptions{TTL: time.Minute})
			if err != nil {
				t.Errorf("Acquire by the next holder = %v", err)
				return
			}
			if err := ledger.Upsert(context.Background(), db, "acct-1", next.Token(), map[string]any{"balance": 50}); err != nil {
				t.Errorf("next holder's write = %v", err)
			}
			waitDone(t, ctx, 5*time.Second)
		}}
		if err := ledger.Upsert(ctx, paused, "acct-1", token, map[string]any{"balance": 40}); err != nil {
			return errors.Join(err, context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, client.ErrStaleToken) || !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Do = %v, want the stale write and the lost lease", err)
	}
	var stale *client.StaleTokenError
	if !errors.As(err, &stale) || stale.Lease != "billing" || stale.CurrentFence <= stale.PresentedToken {
		t.Errorf("StaleTokenError = %+v, want one naming the lease with a fence above the token", stale)
	}

	ac, err := api.NewClientWithResponses(url, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+keyOf(url))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	resource := "acct-1"
	resp, err := ac.ListRejectionsWithResponse(ctx, &api.ListRejectionsParams{Resource: &resource})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("ListRejections = %v, %v", resp.Status(), err)
	}
	type row struct{ Lease, UserAgent, Source string }
	var got []row
	for _, r := range resp.JSON200.Rejections {
		got = append(got, row{deref(r.Lease), deref(r.UserAgent), string(r.Source)})
	}
	if diff := cmp.Diff([]row{{"billing", "late-writer/1.0", "external"}}, got); diff != "" {
		t.Errorf("the server's rejections of acct-1 (-want +got):\n%s", diff)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
