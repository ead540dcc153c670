package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/fence"
)

// openDB opens a fresh SQLite file with an accounts table guarded by fence.
func openDB(t *testing.T) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "fence.db") +
		"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate&_foreign_keys=on"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE accounts (
		id      TEXT PRIMARY KEY,
		owner   TEXT NOT NULL DEFAULT '',
		balance INTEGER NOT NULL DEFAULT 0,
		fence   INTEGER NOT NULL
	)`); err != nil {
		t.Fatalf("create table: %v", err)
	}
	return db
}

// account is one row of the accounts table.
type account struct {
	Owner   string
	Balance int64
	Fence   int64
}

func seed(t *testing.T, db *sql.DB, id string, a account) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO accounts (id, owner, balance, fence) VALUES (?, ?, ?, ?)`,
		id, a.Owner, a.Balance, a.Fence); err != nil {
		t.Fatalf("seed %q: %v", id, err)
	}
}

// row returns the account id, or nil when it has no row.
func row(t *testing.T, db *sql.DB, id string) *account {
	t.Helper()
	var a account
	err := db.QueryRow(`SELECT owner, balance, fence FROM accounts WHERE id = ?`, id).Scan(&a.Owner, &a.Balance, &a.Fence)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %q: %v", id, err)
	}
	return &a
}

var accounts = fence.Table{Name: "accounts", KeyColumn: "id", FenceColumn: "fence"}

// sqlCase is shared by the Update and Upsert tests.
type sqlCase struct {
	name    string
	seed    *account
	token   int64
	wantErr error // compared with cmp: nil, a *StaleTokenError, or a sentinel checked with errors.Is
	want    *account
}

func checkErr(t *testing.T, call string, got, want error) {
	t.Helper()
	var wantStale *fence.StaleTokenError
	switch {
	case want == nil:
		if got != nil {
			t.Fatalf("%s = %v, want nil", call, got)
		}
	case errors.As(want, &wantStale):
		var gotStale *fence.StaleTokenError
		if !errors.As(got, &gotStale) {
			t.Fatalf("%s = %v, want a *StaleTokenError", call, got)
		}
		if diff := cmp.Diff(wantStale, gotStale); diff != "" {
			t.Errorf("%s: StaleTokenError mismatch (-want +got):\n%s", call, diff)
		}
		if !errors.Is(got, fence.ErrStaleToken) {
			t.Errorf("errors.Is(%v, ErrStale) = false, want true", got)
		}
	default:
		if !errors.Is(got, want) {
			t.Fatalf("%s = %v, want %v", call, got, want)
		}
	}
}

func TestTableUpsert(t *testing.T) {
	tests := []sqlCase{
		{name: "OK/NoRow", token: 7, want: &account{Owner: "b", Balance: 20, Fence: 7}},
		{name: "OK/ZeroTokenNoRow", token: 0, want: &account{Owner: "b", Balance: 20, Fence: 0}},
		{name: "OK/EqualToken", seed: &account{"a", 10, 7}, token: 7, want: &account{Owner: "b", Balance: 20, Fence: 7}},
		{name: "OK/HigherToken", seed: &account{"a", 10, 7}, token: 9, want: &account{Owner: "b", Balance: 20, Fence: 9}},
		{name: "ErrStale/LowerToken", seed: &account{"a", 10, 7}, token: 6,
			wantErr: &fence.StaleTokenError{Resource: "acct-1", PresentedToken: 6, CurrentFence: 7},
			want:    &account{"a", 10, 7}},
		{name: "ErrInvalid/Negative", token: -1, wantErr: fence.ErrInvalidToken},
		{name: "ErrInvalid/TooLarge", token: fence.MaxToken + 1, wantErr: fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			if tt.seed != nil {
				seed(t, db, "acct-1", *tt.seed)
			}
			err := accounts.Upsert(context.Background(), db, "acct-1", tt.token, map[string]any{"owner": "b", "balance": 20})
			checkErr(t, "Upsert", err, tt.wantErr)
			if diff := cmp.Diff(tt.want, row(t, db, "acct-1")); diff != "" {
				t.Errorf("row after Upsert (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableUpdate(t *testing.T) {
	tests := []sqlCase{
		{name: "ErrNoRow", token: 7, wantErr: fence.ErrNoRow},
		{name: "OK/EqualToken", seed: &account{"a", 10, 7}, token: 7, want: &account{Owner: "b", Balance: 20, Fence: 7}},
		{name: "OK/HigherToken", seed: &account{"a", 10, 7}, token: 9, want: &account{Owner: "b", Balance: 20, Fence: 9}},
		{name: "ErrStale/LowerToken", seed: &account{"a", 10, 7}, token: 6,
			wantErr: &fence.StaleTokenError{Resource: "acct-1", PresentedToken: 6, CurrentFence: 7},
			want:    &account{"a", 10, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			if tt.seed != nil {
				seed(t, db, "acct-1", *tt.seed)
			}
			err := accounts.Update(context.Background(), db, "acct-1", tt.token, map[string]any{"owner": "b", "balance": 20})
			checkErr(t, "Update", err, tt.wantErr)
			if diff := cmp.Diff(tt.want, row(t, db, "acct-1")); diff != "" {
				t.Errorf("row after Update (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableFenceOnly(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	if err := accounts.Upsert(ctx, db, "k", 5, nil); err != nil {
		t.Fatalf("Upsert(k, 5, nil) = %v, want nil", err)
	}
	if err := accounts.Update(ctx, db, "k", 8, nil); err != nil {
		t.Fatalf("Update(k, 8, nil) = %v, want nil", err)
	}
	got, err := accounts.Current(ctx, db, "k")
	if err != nil || got != 8 {
		t.Fatalf("Current(k) = %d, %v, want 8, nil", got, err)
	}
	if _, err := accounts.Current(ctx, db, "missing"); !errors.Is(err, fence.ErrNoRow) {
		t.Fatalf("Current(missing) error = %v, want ErrNoRow", err)
	}
}

func TestTableOnReject(t *testing.T) {
	db := openDB(t)
	seed(t, db, "acct-1", account{"a", 1, 50})
	var got []fence.Rejection
	tbl := accounts
	tbl.OnReject = func(_ context.Context, r fence.Rejection) { got = append(got, r) }
	ctx := context.Background()
	if err := tbl.Upsert(ctx, db, "acct-1", 50, nil); err != nil {
		t.Fatalf("Upsert(equal) = %v, want nil", err)
	}
	if err := tbl.Upsert(ctx, db, "acct-1", 40, nil); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Upsert(lower) = %v, want ErrStale", err)
	}
	want := []fence.Rejection{{Resource: "acct-1", PresentedToken: 40, CurrentFence: 50, Reason: "stale token on SQL write"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejections (-want +got):\n%s", diff)
	}
}

func TestTableInvalid(t *testing.T) {
	tests := []struct {
		name   string
		table  fence.Table
		values map[string]any
	}{
		{"ErrTableName/Injection", fence.Table{Name: "accounts; DROP TABLE accounts", KeyColumn: "id", FenceColumn: "fence"}, nil},
		{"ErrTableName/Quote", fence.Table{Name: `acc"ounts`, KeyColumn: "id", FenceColumn: "fence"}, nil},
		{"ErrTableName/Empty", fence.Table{KeyColumn: "id", FenceColumn: "fence"}, nil},
		{"ErrTableName/TooManyDots", fence.Table{Name: "a.b.c", KeyColumn: "id", FenceColumn: "fence"}, nil},
		{"ErrKeyColumn/Space", fence.Table{Name: "accounts", KeyColumn: "id x", FenceColumn: "fence"}, nil},
		{"ErrFenceColumn/Digit", fence.Table{Name: "accounts", KeyColumn: "id", FenceColumn: "1fence"}, nil},
		{"ErrSameColumn", fence.Table{Name: "accounts", KeyColumn: "id", FenceColumn: "id"}, nil},
		{"ErrValueColumn/Injection", accounts, map[string]any{"owner = 'x', fence": 1}},
		{"ErrValueColumn/FenceColumn", accounts, map[string]any{"fence": 99}},
		{"ErrValueColumn/KeyColumn", accounts, map[string]any{"id": "other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			seed(t, db, "acct-1", account{"a", 1, 5})
			ctx := context.Background()
			if err := tt.table.Upsert(ctx, db, "acct-1", 9, tt.values); err == nil {
				t.Errorf("Upsert with %+v, %v = nil, want an error", tt.table, tt.values)
			}
			if err := tt.table.Update(ctx, db, "acct-1", 9, tt.values); err == nil {
				t.Errorf("Update with %+v, %v = nil, want an error", tt.table, tt.values)
			}
			if diff := cmp.Diff(&account{"a", 1, 5}, row(t, db, "acct-1")); diff != "" {
				t.Errorf("row changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableStmt(t *testing.T) {
	tbl := fence.Table{Name: "app.accounts", KeyColumn: "id", FenceColumn: "fence"}
	values := map[string]any{"owner": "b", "balance": 20}

	update, current, err := tbl.UpdateStmt("acct-1", 7, values)
	if err != nil {
		t.Fatalf("UpdateStmt: %v", err)
	}
	wantUpdate := fence.Stmt{
		Query: `UPDATE "app"."accounts" SET "fence" = $1, "balance" = $2, "owner" = $3 WHERE "id" = $4 AND "fence" <= $1`,
		Args:  []any{int64(7), 20, "b", "acct-1"},
	}
	if diff := cmp.Diff(wantUpdate, update); diff != "" {
		t.Errorf("UpdateStmt update (-want +got):\n%s", diff)
	}
	wantCurrent := fence.Stmt{Query: `SELECT "fence" FROM "app"."accounts" WHERE "id" = $1`, Args: []any{"acct-1"}}
	if diff := cmp.Diff(wantCurrent, current); diff != "" {
		t.Errorf("UpdateStmt current (-want +got):\n%s", diff)
	}

	upsert, _, err := tbl.UpsertStmt("acct-1", 7, values)
	if err != nil {
		t.Fatalf("UpsertStmt: %v", err)
	}
	wantUpsert := fence.Stmt{
		Query: `INSERT INTO "app"."accounts" AS "cur" ("id", "fence", "balance", "owner") VALUES ($1, $2, $3, $4) ` +
			`ON CONFLICT ("id") DO UPDATE SET "fence" = excluded."fence", "balance" = excluded."balance", "owner" = excluded."owner" ` +
			`WHERE "cur"."fence" <= excluded."fence"`,
		Args: []any{"acct-1", int64(7), 20, "b"},
	}
	if diff := cmp.Diff(wantUpsert, upsert); diff != "" {
		t.Errorf("UpsertStmt (-want +got):\n%s", diff)
	}
}

func TestExec(t *testing.T) {
	const (
		update  = `UPDATE accounts SET balance = ?1, fence = ?2 WHERE id = ?3 AND fence <= ?2 AND owner = ?4`
		current = `SELECT fence FROM accounts WHERE id = ?1`
	)
	tests := []struct {
		name         string
		token        int64
		owner        string // the extra condition in update
		noCurrent    bool
		wantErr      error
		wantErrText  bool // any error
		want         account
		wantRejected []fence.Rejection
	}{
		{name: "OK/EqualToken", token: 10, owner: "a", want: account{"a", 99, 10}},
		{name: "OK/HigherToken", token: 11, owner: "a", want: account{"a", 99, 11}},
		{name: "ErrStale", token: 9, owner: "a", want: account{"a", 1, 10},
			wantErr:      &fence.StaleTokenError{Resource: "acct-1", PresentedToken: 9, CurrentFence: 10},
			wantRejected: []fence.Rejection{{Resource: "acct-1", PresentedToken: 9, CurrentFence: 10, Reason: "stale token on SQL write"}}},
		{name: "ErrOtherCondition", token: 11, owner: "someone-else", wantErrText: true, want: account{"a", 1, 10}},
		{name: "ErrNoCurrent", token: 11, owner: "a", noCurrent: true, wantErrText: true, want: account{"a", 1, 10}},
		{name: "ErrInvalidToken", token: -3, owner: "a", wantErr: fence.ErrInvalidToken, want: account{"a", 1, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			seed(t, db, "acct-1", account{"a", 1, 10})
			var rejected []fence.Rejection
			w := fence.Write{
				Key:      "acct-1",
				Token:    tt.token,
				Update:   fence.Stmt{Query: update, Args: []any{99, tt.token, "acct-1", tt.owner}},
				Current:  fence.Stmt{Query: current, Args: []any{"acct-1"}},
				OnReject: func(_ context.Context, r fence.Rejection) { rejected = append(rejected, r) },
			}
			if tt.noCurrent {
				w.Current = fence.Stmt{}
			}
			err := fence.Exec(context.Background(), db, w)
			if tt.wantErrText {
				if err == nil || errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrNoRow) {
					t.Fatalf("Exec = %v, want an error that is neither ErrStale nor ErrNoRow", err)
				}
			} else {
				checkErr(t, "Exec", err, tt.wantErr)
			}
			if diff := cmp.Diff(&tt.want, row(t, db, "acct-1")); diff != "" {
				t.Errorf("row after Exec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRejected, rejected); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExecInTransaction(t *testing.T) {
	db := openDB(t)
	seed(t, db, "acct-1", account{"a", 1, 10})
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := accounts.Update(ctx, tx, "acct-1", 12, map[string]any{"balance": 5}); err != nil {
		t.Fatalf("Update(12) in tx = %v, want nil", err)
	}
	err = accounts.Update(ctx, tx, "acct-1", 11, map[string]any{"balance": 6})
	checkErr(t, "Update(11) in tx", err, &fence.StaleTokenError{Resource: "acct-1", PresentedToken: 11, CurrentFence: 12})
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&account{"a", 1, 10}, row(t, db, "acct-1")); diff != "" {
		t.Errorf("row after rollback (-want +got):\n%s", diff)
	}
}

// TestUpsertConcurrent races many writers with interleaved tokens on one row:
// the fence never falls, every refusal names a higher fence, and the row ends
// holding the value written with the highest token.
func TestUpsertConcurrent(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	const writers, perWriter = 8, 25
	tokens := rand.Perm(writers * perWriter)

	done := make(chan struct{})
	watcherErr := make(chan error, 1)
	go func() {
		// The watcher reads the fence as writers run; it must only rise.
		var last int64 = -1
		for {
			select {
			case <-done:
				watcherErr <- nil
				return
			default:
			}
			f, err := accounts.Current(ctx, db, "hot")
			if errors.Is(err, fence.ErrNoRow) {
				continue
			}
			if err != nil {
				watcherErr <- err
				return
			}
			if f < last {
				watcherErr <- errors.New("fence fell from " + strconv.FormatInt(last, 10) + " to " + strconv.FormatInt(f, 10))
				return
			}
			last = f
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for _, tok := range tokens[w*perWriter : (w+1)*perWriter] {
				token := int64(tok)
				err := accounts.Upsert(ctx, db, "hot", token, map[string]any{"owner": strconv.FormatInt(token, 10), "balance": token})
				var stale *fence.StaleTokenError
				switch {
				case err == nil:
				case errors.As(err, &stale):
					if stale.CurrentFence <= token {
						errs <- errors.New("stale error with current " + strconv.FormatInt(stale.CurrentFence, 10) + " <= token " + strconv.FormatInt(token, 10))
					}
				default:
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	close(errs)
	for err := range errs {
		t.Errorf("Upsert: %v", err)
	}
	if err := <-watcherErr; err != nil {
		t.Errorf("watcher: %v", err)
	}
	max := int64(writers*perWriter - 1)
	want := &account{Owner: strconv.FormatInt(max, 10), Balance: max, Fence: max}
	if diff := cmp.Diff(want, row(t, db, "hot")); diff != "" {
		t.Errorf("final row (-want +got):\n%s", diff)
	}
}

// cancelling is a DB whose caller's context ends while a statement runs: before the
// statement reaches the database (before), or after it has run (after).
type cancelling struct {
	db     *sql.DB
	cancel context.CancelFunc
	after  bool
}

func (c cancelling) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if !c.after {
		c.cancel()
	}
	res, err := c.db.ExecContext(ctx, q, args...)
	if c.after {
		c.cancel()
	}
	return res, err
}

func (c cancelling) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, q, args...)
}

// TestTableContextEndsMidWrite ends the caller's context while a stale write is in flight
// and checks the write is still classified as stale and reported, with a context the
// report can use, and that the lease name reaches the error and the rejection.
func TestTableContextEndsMidWrite(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after bool
	}{{"ErrStale/EndsBeforeTheStatement", false}, {"ErrStale/EndsAfterTheStatement", true}} {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			seed(t, db, "acct-1", account{"a", 1, 10})
			var got []fence.Rejection
			var reportCtxErr error
			tbl := accounts
			tbl.Lease = "billing"
			tbl.OnReject = func(ctx context.Context, r fence.Rejection) {
				reportCtxErr = ctx.Err()
				got = append(got, r)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := tbl.Update(ctx, cancelling{db: db, cancel: cancel, after: tt.after}, "acct-1", 9, map[string]any{"balance": 2})
			checkErr(t, "Update(stale) as the context ends", err,
				&fence.StaleTokenError{Resource: "acct-1", Lease: "billing", PresentedToken: 9, CurrentFence: 10})
			want := []fence.Rejection{{Resource: "acct-1", Lease: "billing", PresentedToken: 9, CurrentFence: 10, Reason: "stale token on SQL write"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
			if reportCtxErr != nil {
				t.Errorf("OnReject's context had ended: %v", reportCtxErr)
			}
		})
	}
	t.Run("ErrNotWrittenWhenAlreadyEnded", func(t *testing.T) {
		db := openDB(t)
		seed(t, db, "acct-1", account{"a", 1, 10})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := accounts.Update(ctx, db, "acct-1", 11, map[string]any{"balance": 2})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Update under an ended context = %v, want context.Canceled", err)
		}
		if diff := cmp.Diff(&account{"a", 1, 10}, row(t, db, "acct-1")); diff != "" {
			t.Errorf("row (-want +got):\n%s", diff)
		}
	})
}
