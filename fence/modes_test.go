package fence_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/fence"
)

// fakeModes knows the tokens of readers (true) and writers (false); any other token is
// unknown. With err set, every lookup fails with it. It counts the lookups.
type fakeModes struct {
	mu     sync.Mutex
	shared map[int64]bool
	err    error
	asked  int
}

func (f *fakeModes) Shared(_ context.Context, token int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.err != nil {
		return false, f.err
	}
	s, ok := f.shared[token]
	if !ok {
		return false, fmt.Errorf("token %d: %w", token, fence.ErrUnknownToken)
	}
	return s, nil
}

func (f *fakeModes) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

const (
	readerToken int64 = 50 // a shared (read) lease's
	writerToken int64 = 40 // an exclusive lease's, below the reader's
)

func newFakeModes() *fakeModes {
	return &fakeModes{shared: map[int64]bool{readerToken: true, writerToken: false}}
}

// TestModeCache: a token's mode is asked once and remembered (it never changes); unknown
// tokens and failures are not remembered; past its size the least recently used goes.
func TestModeCache(t *testing.T) {
	ctx := context.Background()
	src := newFakeModes()
	src.shared[41], src.shared[42] = false, true
	c := fence.NewModeCache(src, 2)
	for range 3 {
		if s, err := c.Shared(ctx, readerToken); err != nil || !s {
			t.Fatalf("Shared(reader) = %v, %v; want true", s, err)
		}
	}
	if n := src.lookups(); n != 1 {
		t.Errorf("three lookups of one token asked the source %d times, want once", n)
	}
	for range 2 {
		if _, err := c.Shared(ctx, 7); !errors.Is(err, fence.ErrUnknownToken) {
			t.Errorf("Shared(unknown) = %v, want ErrUnknownToken", err)
		}
	}
	if n := src.lookups(); n != 3 {
		t.Errorf("source asked %d times after two lookups of an unknown token, want 3: unknown tokens are not remembered", n)
	}
	// writer in, reader used since: the next one pushes the writer out, not the reader.
	if s, err := c.Shared(ctx, writerToken); err != nil || s {
		t.Fatalf("Shared(writer) = %v, %v; want false", s, err)
	}
	c.Shared(ctx, readerToken)
	c.Shared(ctx, 41)
	if c.Len() != 2 {
		t.Errorf("Len() = %d, want the size 2", c.Len())
	}
	before := src.lookups()
	c.Shared(ctx, readerToken)
	if src.lookups() != before {
		t.Errorf("the recently used reader's token was forgotten")
	}
	c.Shared(ctx, writerToken)
	if src.lookups() != before+1 {
		t.Errorf("the least recently used token (the writer's) was not the one forgotten")
	}
	src.err = errors.New("connection refused")
	if _, err := c.Shared(ctx, 42); err == nil || errors.Is(err, fence.ErrUnknownToken) {
		t.Errorf("Shared with the source failing = %v, want its error", err)
	}
	src.err = nil
	if s, err := c.Shared(ctx, 42); err != nil || !s {
		t.Errorf("Shared(42) once the source answers = %v, %v; want true: failures are not remembered", s, err)
	}
}

// TestMiddlewareModes: with WithModes, a reader's token is 409 shared_token (reported, the mark
// left alone, the handler not run), even above the mark; a writer's passes; a token of no known
// grant is 409 unknown_token and a failed lookup 503, both without raising the mark. Without
// WithModes the middleware cannot tell, and the reader's token passes.
func TestMiddlewareModes(t *testing.T) {
	modes := newFakeModes()
	var marks fence.Memory
	var rejected []fence.Rejection
	var logged []error
	h := fence.Middleware(&marks, fence.WithModes(modes),
		fence.WithOnReject(func(_ context.Context, r fence.Rejection) { rejected = append(rejected, r) }),
		fence.WithErrorLog(func(_ *http.Request, err error) { logged = append(logged, err) }))
	send := func(h func(http.Handler) http.Handler, token int64) (*httptest.ResponseRecorder, *seen) {
		var s seen
		req := httptest.NewRequest(http.MethodPut, "/files/a", nil)
		req.Header.Set(fence.Header, strconv.FormatInt(token, 10))
		req.Header.Set("Lease-Name", "cfg")
		rec := httptest.NewRecorder()
		h(okHandler(&s)).ServeHTTP(rec, req)
		return rec, &s
	}

	rec, s := send(h, readerToken)
	if rec.Code != http.StatusConflict || s.called {
		t.Fatalf("reader's token = %d (handler ran: %v), want 409 and no handler", rec.Code, s.called)
	}
	if body := problemBody(t, rec); body["code"] != "shared_token" || body["presented_token"] != float64(readerToken) {
		t.Errorf("reader's token answered %v, want code shared_token with presented_token %d", body, readerToken)
	}
	if m, ok := marks.Mark("/files/a"); ok {
		t.Errorf("a reader's token raised the mark to %d", m)
	}
	want := []fence.Rejection{{Resource: "/files/a", Lease: "cfg", PresentedToken: readerToken, Code: fence.CodeSharedToken,
		Reason: "shared token on PUT /files/a"}}
	if diff := cmp.Diff(want, rejected); diff != "" {
		t.Errorf("rejections reported differ (-want +got):\n%s", diff)
	}

	if rec, s := send(h, writerToken); rec.Code != http.StatusNoContent || !s.called || s.token != writerToken {
		t.Errorf("writer's token = %d, handler %+v; want 204 with the token", rec.Code, s)
	}
	rec, s = send(h, readerToken)
	if rec.Code != http.StatusConflict || s.called || problemBody(t, rec)["code"] != "shared_token" {
		t.Errorf("reader's token above the writer's mark = %d %s, want 409 shared_token", rec.Code, rec.Body)
	}
	if len(rejected) != 2 || rejected[1].CurrentFence != writerToken {
		t.Errorf("second rejection = %+v, want it with the mark %d", rejected[len(rejected)-1], writerToken)
	}

	rec, s = send(h, writerToken+100)
	if rec.Code != http.StatusConflict || s.called || problemBody(t, rec)["code"] != "unknown_token" {
		t.Errorf("unknown token = %d %s, want 409 unknown_token", rec.Code, rec.Body)
	}
	modes.err = errors.New("connection refused")
	rec, s = send(h, writerToken)
	if rec.Code != http.StatusServiceUnavailable || s.called || problemBody(t, rec)["code"] != "unavailable" {
		t.Errorf("token with the lookup failing = %d %s, want 503 unavailable", rec.Code, rec.Body)
	}
	if len(logged) != 1 || !errors.Is(logged[0], fence.ErrModeUnknown) {
		t.Errorf("errors logged = %v, want the failed lookup, wrapping ErrModeUnknown", logged)
	}
	if m, _ := marks.Mark("/files/a"); m != writerToken || len(rejected) != 2 {
		t.Errorf("mark %d, %d rejections after refusals that are not stale; want %d and still 2", m, len(rejected), writerToken)
	}

	var plain fence.Memory
	if rec, s := send(fence.Middleware(&plain), readerToken); rec.Code != http.StatusNoContent || !s.called {
		t.Errorf("reader's token without WithModes = %d, want 204 (nothing tells it)", rec.Code)
	}
}

// TestTableModes: with Modes, Table refuses a reader's token (ErrSharedToken, not
// ErrStaleToken) without touching the row, even above its fence, and reports it; a writer's
// token writes; a token whose mode cannot be learned is refused (ErrModeUnknown) and writes
// nothing, unreported. Exec does the same for statements of one's own.
func TestTableModes(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	modes := newFakeModes()
	var rejected []fence.Rejection
	tbl := fence.Table{Name: "accounts", KeyColumn: "id", FenceColumn: "fence", Lease: "cfg", Modes: modes,
		OnReject: func(_ context.Context, r fence.Rejection) { rejected = append(rejected, r) }}

	err := tbl.Upsert(ctx, db, "acct", readerToken, map[string]any{"balance": 1})
	var se *fence.SharedTokenError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrSharedToken) || errors.Is(err, fence.ErrStaleToken) || se.PresentedToken != readerToken {
		t.Fatalf("Upsert(reader's token) = %v, want a *SharedTokenError, not a stale one", err)
	}
	if a := row(t, db, "acct"); a != nil {
		t.Fatalf("a reader's token created row %+v", a)
	}
	if err := tbl.Upsert(ctx, db, "acct", writerToken, map[string]any{"balance": 2}); err != nil {
		t.Fatalf("Upsert(writer's token) = %v", err)
	}
	if err := tbl.Update(ctx, db, "acct", readerToken, map[string]any{"balance": 3}); !errors.Is(err, fence.ErrSharedToken) {
		t.Errorf("Update(reader's token above the fence) = %v, want ErrSharedToken", err)
	}
	if a := row(t, db, "acct"); a == nil || a.Balance != 2 || a.Fence != writerToken {
		t.Errorf("row after a reader's update = %+v, want balance 2 at fence %d", a, writerToken)
	}
	want := []fence.Rejection{
		{Resource: "acct", Lease: "cfg", PresentedToken: readerToken, Code: fence.CodeSharedToken, Reason: "shared token on SQL write"},
		{Resource: "acct", Lease: "cfg", PresentedToken: readerToken, CurrentFence: writerToken, Code: fence.CodeSharedToken, Reason: "shared token on SQL write"},
	}
	if diff := cmp.Diff(want, rejected); diff != "" {
		t.Errorf("rejections reported differ (-want +got):\n%s", diff)
	}

	modes.err = errors.New("connection refused")
	if err := tbl.Update(ctx, db, "acct", writerToken+1, map[string]any{"balance": 4}); !errors.Is(err, fence.ErrModeUnknown) || errors.Is(err, fence.ErrSharedToken) {
		t.Errorf("Update with the lookup failing = %v, want ErrModeUnknown", err)
	}
	modes.err = nil
	if err := tbl.Update(ctx, db, "acct", writerToken+1, map[string]any{"balance": 4}); !errors.Is(err, fence.ErrModeUnknown) || !errors.Is(err, fence.ErrUnknownToken) {
		t.Errorf("Update(token of no known grant) = %v, want ErrModeUnknown wrapping ErrUnknownToken", err)
	}
	if a := row(t, db, "acct"); a == nil || a.Balance != 2 || len(rejected) != 2 {
		t.Errorf("row %+v after refusals with %d reports, want balance 2 and no new report", a, len(rejected))
	}

	up, cur, err := tbl.UpdateStmt("acct", readerToken, map[string]any{"balance": 5})
	if err != nil {
		t.Fatal(err)
	}
	err = fence.Exec(ctx, db, fence.Write{Key: "acct", Token: readerToken, Update: up, Current: cur, Modes: modes})
	if !errors.Is(err, fence.ErrSharedToken) {
		t.Errorf("Exec(reader's token) = %v, want ErrSharedToken", err)
	}
	if a := row(t, db, "acct"); a == nil || a.Balance != 2 {
		t.Errorf("row after Exec with a reader's token = %+v, want balance 2", a)
	}
}

// blockingModes answers every token as a writer's once release is closed, counting lookups.
type blockingModes struct {
	release chan struct{}
	mu      sync.Mutex
	asked   int
}

func (b *blockingModes) Shared(ctx context.Context, _ int64) (bool, error) {
	b.mu.Lock()
	b.asked++
	b.mu.Unlock()
	select {
	case <-b.release:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// TestModeCacheAsksOncePerToken: writes of one new token that arrive together ask the source
// once; whoever comes while it is asked waits for that answer, and whoever comes after finds
// it remembered.
func TestModeCacheAsksOncePerToken(t *testing.T) {
	src := &blockingModes{release: make(chan struct{})}
	c := fence.NewModeCache(src, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if shared, err := c.Shared(context.Background(), writerToken); err != nil || shared {
				errs <- fmt.Errorf("Shared = %v, %v; want false", shared, err)
			}
		})
	}
	close(src.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if src.asked != 1 {
		t.Errorf("8 concurrent lookups of one token asked the source %d times, want once", src.asked)
	}
}
