package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DB is what the SQL helpers need from a database handle. *sql.DB, *sql.Tx
// and *sql.Conn implement it. Pass a *sql.Tx to make a fenced write part of a
// larger transaction.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ DB = (*sql.DB)(nil)
	_ DB = (*sql.Tx)(nil)
	_ DB = (*sql.Conn)(nil)
)

// Stmt is a SQL statement and its bind arguments.
type Stmt struct {
	// Query is the SQL text, with placeholders in the driver's syntax.
	Query string
	// Args are the values bound to the placeholders.
	Args []any
}

// Write is a fenced write whose SQL the caller writes; see Exec.
type Write struct {
	// Key names the fenced row in errors and rejections.
	Key string
	// Lease is the lease the token came from, for errors and rejections;
	// optional.
	Lease string
	// Token is the fencing token the write carries.
	Token int64
	// Update is the conditional statement. It must change the row only when
	// Token is at least the row's fence, and set the fence to Token, e.g.
	//
	//	UPDATE accounts SET balance = ?1, fence = ?2 WHERE id = ?3 AND fence <= ?2
	Update Stmt
	// Current is a query returning the key's fence as a single integer, and no
	// row when the key has none, e.g.
	//
	//	SELECT fence FROM accounts WHERE id = ?1
	//
	// It runs only when Update changed nothing, to tell a stale token from a
	// missing row and to report the fence.
	Current Stmt
	// OnReject, when not nil, is called (before Exec returns) for every write
	// refused as stale, with a context that the caller's cancellation does not
	// end.
	OnReject func(context.Context, Rejection)
	// Timeout bounds a write once it has begun; zero means
	// DefaultWriteTimeout. See Exec.
	Timeout time.Duration
	// Modes, when not nil, refuses a shared (read) lease's token as leasekeeper
	// does: see Exec.
	Modes Modes
}

// DefaultWriteTimeout bounds a fenced SQL write, from its start to its
// classification, when the Write or Table sets no Timeout.
const DefaultWriteTimeout = 10 * time.Second

// Exec runs w.Update on db and returns nil when it changed at least one row.
// When it changed none, Exec runs w.Current and returns
//
//   - a *StaleTokenError (errors.Is(err, ErrStaleToken)) when the fence is
//     above w.Token, after calling w.OnReject;
//   - an error wrapping ErrNoRow when the key has no row;
//   - another error when the fence is not above w.Token, meaning Update's
//     WHERE clause refused the write for another reason (or the row was
//     created between the two statements).
//
// The decision is made by Update alone, inside the database; w.Current only
// explains it. Run both in one transaction (db a *sql.Tx) for the explanation
// to be exact: outside one, a newer holder may raise the fence in between,
// and the reported fence is then a later, higher one.
//
// ctx decides whether the write begins: when it has already ended, nothing is
// sent and its error is returned. Once begun, the write, its explanation and
// the OnReject call run to the end under ctx's values but not its
// cancellation, bounded by w.Timeout, so that a caller whose context ends
// mid-write (a lease context ending as the lease is lost, say) still learns
// whether the database refused the write, and the refusal is still reported.
// A transaction (db a *sql.Tx) is the exception: database/sql rolls it back
// when the context it began with ends, whatever Exec does.
//
// With w.Modes set, Exec first asks it for the token's mode (within the
// write's timeout) and sends nothing to the database unless the token is known
// to be a writer's: a shared (read) lease's token is refused with a
// *SharedTokenError (errors.Is(err, ErrSharedToken)), reported to w.OnReject
// with the row's fence when Current finds one; a token whose mode cannot be
// learned with an error wrapping ErrModeUnknown (fail closed), not reported.
//
// Exec relies on RowsAffected counting the rows that matched the WHERE
// clause. SQLite and PostgreSQL do; MySQL by default counts only rows whose
// values changed, so a repeated identical write with an equal token would
// look stale. With go-sql-driver/mysql, set clientFoundRows=true.
func Exec(ctx context.Context, db DB, w Write) error {
	if err := checkToken(w.Token); err != nil {
		return fmt.Errorf("fence %q: %w", w.Key, err)
	}
	if strings.TrimSpace(w.Update.Query) == "" || strings.TrimSpace(w.Current.Query) == "" {
		return fmt.Errorf("fence %q: Write needs both an Update and a Current statement", w.Key)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fence %q: not written: %w", w.Key, context.Cause(ctx))
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultWriteTimeout
	}
	detached := context.WithoutCancel(ctx)
	wctx, cancel := context.WithTimeout(detached, timeout)
	defer cancel()
	if err := checkMode(wctx, w.Modes, w.Key, w.Lease, w.Token); err != nil {
		if se, ok := errors.AsType[*SharedTokenError](err); ok && w.OnReject != nil {
			var current int64 // 0 when the key has no row (or its fence cannot be read)
			_ = db.QueryRowContext(wctx, w.Current.Query, w.Current.Args...).Scan(&current)
			w.OnReject(detached, se.Rejection(current, "shared token on SQL write"))
		}
		return err
	}
	res, err := db.ExecContext(wctx, w.Update.Query, w.Update.Args...)
	if err != nil {
		return fmt.Errorf("fence %q: write: %w", w.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence %q: rows affected: %w", w.Key, err)
	}
	if n > 0 {
		return nil
	}
	var current int64
	err = db.QueryRowContext(wctx, w.Current.Query, w.Current.Args...).Scan(&current)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("fence %q: %w", w.Key, ErrNoRow)
	case err != nil:
		return fmt.Errorf("fence %q: write refused, reading current fence: %w", w.Key, err)
	case current <= w.Token:
		return fmt.Errorf("fence %q: write changed no row although token %d is not below fence %d", w.Key, w.Token, current)
	}
	stale := &StaleTokenError{Resource: w.Key, Lease: w.Lease, PresentedToken: w.Token, CurrentFence: current}
	if w.OnReject != nil {
		w.OnReject(detached, stale.Rejection("stale token on SQL write"))
	}
	return stale
}

// Table describes a table whose rows each carry their own fence, and builds
// the guarded statements for it. The table needs a unique (or primary) key
// on KeyColumn and an integer FenceColumn, for example
//
//	CREATE TABLE accounts (
//		id      TEXT PRIMARY KEY,
//		balance INTEGER NOT NULL,
//		fence   INTEGER NOT NULL
//	);
//
// Identifiers must match [A-Za-z_][A-Za-z0-9_]{0,62} (Name may be qualified as
// schema.table); they are double-quoted in the SQL, so in PostgreSQL they are
// matched case-sensitively: give them as stored (lower case for unquoted DDL).
// Values are never interpolated: every value is a bind parameter. The SQL uses
// $1, $2, … placeholders, which both PostgreSQL and SQLite understand. MySQL
// is not supported by Table; use Exec with your own statements there.
type Table struct {
	// Name is the table, optionally schema-qualified.
	Name string
	// KeyColumn is the column that identifies a row.
	KeyColumn string
	// FenceColumn is the integer column holding the row's fence.
	FenceColumn string
	// Lease, when set, is the lease whose tokens guard the table: rejections
	// and errors name it, so the dashboard shows which lease was overrun.
	Lease string
	// OnReject, when not nil, is called for every write refused as stale; see
	// Write.OnReject.
	OnReject func(context.Context, Rejection)
	// Timeout bounds each write once begun; see Write.Timeout.
	Timeout time.Duration
	// Modes, when not nil, refuses a shared (read) lease's token; see
	// Write.Modes.
	Modes Modes
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func quoteIdent(kind, s string) (string, error) {
	if !identRE.MatchString(s) {
		return "", fmt.Errorf("invalid %s identifier %q", kind, truncate(s))
	}
	return `"` + s + `"`, nil
}

// idents validates the table's identifiers and returns them quoted.
func (t Table) idents() (name, key, fenceCol string, err error) {
	parts := strings.Split(t.Name, ".")
	if len(parts) > 2 {
		return "", "", "", fmt.Errorf("invalid table name %q", truncate(t.Name))
	}
	for i, p := range parts {
		if parts[i], err = quoteIdent("table", p); err != nil {
			return "", "", "", err
		}
	}
	name = strings.Join(parts, ".")
	if key, err = quoteIdent("key column", t.KeyColumn); err != nil {
		return "", "", "", err
	}
	if fenceCol, err = quoteIdent("fence column", t.FenceColumn); err != nil {
		return "", "", "", err
	}
	if t.KeyColumn == t.FenceColumn {
		return "", "", "", fmt.Errorf("key column and fence column are both %q", t.KeyColumn)
	}
	return name, key, fenceCol, nil
}

// columns validates the names of values (sorted, for stable SQL) and returns
// them quoted, with the values in the same order.
func (t Table) columns(values map[string]any) (cols []string, args []any, err error) {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if n == t.KeyColumn || n == t.FenceColumn {
			return nil, nil, fmt.Errorf("column %q is set by the fence itself; leave it out of values", n)
		}
		q, err := quoteIdent("column", n)
		if err != nil {
			return nil, nil, err
		}
		cols = append(cols, q)
		args = append(args, values[n])
	}
	return cols, args, nil
}

// UpdateStmt returns the guarded UPDATE for key and token, and the query that
// reads the key's fence, without running them.
//
//	UPDATE "t" SET "fence" = $1, "a" = $2, … WHERE "key" = $n AND "fence" <= $1
func (t Table) UpdateStmt(key string, token int64, values map[string]any) (update, current Stmt, err error) {
	name, keyCol, fenceCol, err := t.idents()
	if err != nil {
		return Stmt{}, Stmt{}, err
	}
	cols, vals, err := t.columns(values)
	if err != nil {
		return Stmt{}, Stmt{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "UPDATE %s SET %s = $1", name, fenceCol)
	args := []any{token}
	for i, c := range cols {
		args = append(args, vals[i])
		fmt.Fprintf(&b, ", %s = $%d", c, len(args))
	}
	args = append(args, key)
	// $1 appears first and $n in increasing order, which SQLite needs to
	// number the $-parameters the way PostgreSQL does.
	fmt.Fprintf(&b, " WHERE %s = $%d AND %s <= $1", keyCol, len(args), fenceCol)
	update = Stmt{Query: b.String(), Args: args}
	return update, t.currentStmt(name, keyCol, fenceCol, key), nil
}

// UpsertStmt returns the guarded insert-or-update for key and token, and the
// query that reads the key's fence, without running them.
//
//	INSERT INTO "t" AS "cur" ("key", "fence", "a", …) VALUES ($1, $2, $3, …)
//	ON CONFLICT ("key") DO UPDATE SET "fence" = excluded."fence", "a" = excluded."a", …
//	WHERE "cur"."fence" <= excluded."fence"
func (t Table) UpsertStmt(key string, token int64, values map[string]any) (upsert, current Stmt, err error) {
	name, keyCol, fenceCol, err := t.idents()
	if err != nil {
		return Stmt{}, Stmt{}, err
	}
	cols, vals, err := t.columns(values)
	if err != nil {
		return Stmt{}, Stmt{}, err
	}
	all := append([]string{keyCol, fenceCol}, cols...)
	args := append([]any{key, token}, vals...)
	ph := make([]string, len(all))
	set := make([]string, 0, len(all)-1)
	for i, c := range all {
		ph[i] = "$" + strconv.Itoa(i+1)
		if i > 0 {
			set = append(set, fmt.Sprintf("%s = excluded.%s", c, c))
		}
	}
	q := fmt.Sprintf(`INSERT INTO %s AS "cur" (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE "cur".%s <= excluded.%s`,
		name, strings.Join(all, ", "), strings.Join(ph, ", "), keyCol, strings.Join(set, ", "), fenceCol, fenceCol)
	return Stmt{Query: q, Args: args}, t.currentStmt(name, keyCol, fenceCol, key), nil
}

func (t Table) currentStmt(name, keyCol, fenceCol, key string) Stmt {
	return Stmt{
		Query: fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", fenceCol, name, keyCol),
		Args:  []any{key},
	}
}

// Update sets values (column name → value) and the fence of key's row to
// token, if and only if token is at least the row's fence, in one statement.
// It returns a *StaleTokenError (errors.Is(err, ErrStaleToken)) when the token is
// stale, and an error wrapping ErrNoRow when key has no row; use Upsert to
// create rows. values may be empty, to raise the fence alone.
func (t Table) Update(ctx context.Context, db DB, key string, token int64, values map[string]any) error {
	update, current, err := t.UpdateStmt(key, token, values)
	if err != nil {
		return fmt.Errorf("fence %q: %w", key, err)
	}
	return Exec(ctx, db, t.write(key, token, update, current))
}

// Upsert is Update for a row that may not exist yet: a missing row is
// inserted with values and fence = token (a key without a row has no fence,
// so any valid token may create it); an existing row is updated only if token
// is at least its fence. It returns a *StaleTokenError when the token is
// stale. Columns not in values get their defaults on insert.
func (t Table) Upsert(ctx context.Context, db DB, key string, token int64, values map[string]any) error {
	upsert, current, err := t.UpsertStmt(key, token, values)
	if err != nil {
		return fmt.Errorf("fence %q: %w", key, err)
	}
	return Exec(ctx, db, t.write(key, token, upsert, current))
}

// write is the Write of one Update or Upsert.
func (t Table) write(key string, token int64, stmt, current Stmt) Write {
	return Write{Key: key, Lease: t.Lease, Token: token, Update: stmt, Current: current, OnReject: t.OnReject, Timeout: t.Timeout, Modes: t.Modes}
}

// Current returns the fence of key's row, or an error wrapping ErrNoRow when
// key has no row.
func (t Table) Current(ctx context.Context, db DB, key string) (int64, error) {
	name, keyCol, fenceCol, err := t.idents()
	if err != nil {
		return 0, fmt.Errorf("fence %q: %w", key, err)
	}
	q := t.currentStmt(name, keyCol, fenceCol, key)
	var f int64
	err = db.QueryRowContext(ctx, q.Query, q.Args...).Scan(&f)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("fence %q: %w", key, ErrNoRow)
	}
	if err != nil {
		return 0, fmt.Errorf("fence %q: read fence: %w", key, err)
	}
	return f, nil
}
