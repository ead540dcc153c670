// Package storetest is the conformance suite of store.Store: every behavioural case once, run
// by each backend's tests against a real database.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// Opener opens the database of one test; called again after the previous store is closed, it
// reopens the same database (a restart). It registers cleanup with t.
type Opener func(clock lease.Clock) store.Store

// NewDB makes a fresh, empty database for one test and returns its Opener.
type NewDB func(t *testing.T) Opener

// T0 is the fake clock's start in every case.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *lease.FakeClock
	open  Opener
	s     store.Store
}

func setup(t *testing.T, newDB NewDB) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), clock: lease.NewFakeClock(t0), open: newDB(t)}
	e.s = e.open(e.clock)
	return e
}

// restart closes the store and opens the same database again.
func (e *env) restart() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("Close() = %v", err)
	}
	e.s = e.open(e.clock)
}

func (e *env) acquire(name, holder string, ttl time.Duration) lease.Lease {
	e.t.Helper()
	l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: holder, TTL: ttl})
	if err != nil {
		e.t.Fatalf("Acquire(%q, %q) = %v, want a grant", name, holder, err)
	}
	return l
}

func wantCode(t *testing.T, what string, err error, code lease.Code) *lease.Error {
	t.Helper()
	if got := lease.ErrorCode(err); got != code {
		t.Fatalf("%s = %v (code %q), want code %q", what, err, got, code)
	}
	var le *lease.Error
	errors.As(err, &le)
	return le
}

func (e *env) events(name string) []lease.Event {
	e.t.Helper()
	p, err := e.s.Events(e.ctx, store.EventFilter{Name: name, Limit: store.MaxLimit})
	if err != nil {
		e.t.Fatalf("Events(%q) = %v", name, err)
	}
	return p.Items
}

func types(evs []lease.Event) []lease.EventType {
	var out []lease.EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// Option adapts the suite to a backend.
type Option func(*options)

type options struct {
	databaseClock bool
	only          string
}

// DatabaseClock says the backend decides by its database's clock, not the process's: a restart
// of the process changes no lease, so invariant 5 (conservative restart) has nothing to do and
// its case is skipped.
func DatabaseClock() Option { return func(o *options) { o.databaseClock = true } }

// Only runs the cases whose names start with prefix alone (for a backend's variant that only
// they tell apart).
func Only(prefix string) Option { return func(o *options) { o.only = prefix } }

// Run runs every case against the backend.
func Run(t *testing.T, newDB NewDB, opts ...Option) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"Acquire/OK", testAcquireOK},
		{"Acquire/ErrHeld", testAcquireHeld},
		{"Acquire/AfterExpiry", testAcquireAfterExpiry},
		{"Acquire/Metadata", testMetadata},
		{"Renew/OK", testRenewOK},
		{"Renew/Metadata", testRenewMetadata},
		{"Renew/ErrLostWrongID", testRenewWrongID},
		{"Renew/ErrLostExpired", testRenewExpired},
		{"Renew/ErrLostRevoked", testRenewRevoked},
		{"Release/OK", testReleaseOK},
		{"Release/ErrLostExpired", testReleaseExpired},
		{"StaleIDNeverTouchesSuccessor", testStaleID},
		{"Revoke", testRevoke},
		{"Revoke/ByToken", testRevokeByToken},
		{"Get", testGet},
		{"Tokens/GrowWhenClockGoesBack", testTokensClockBack},
		{"Tokens/GrowAcrossReopen", testTokensReopen},
		{"Restart/Conservative", testRestartConservative},
		{"Restart/ExpiredBeforeCrash", testRestartExpiredBefore},
		{"Restart/ExtensionVisible", func(t *testing.T, e *env) { testRestartVisible(t, e, o.databaseClock) }},
		{"Idempotency", testIdempotency},
		{"Handover", testHandover},
		{"Triage", func(t *testing.T, e *env) { testTriage(t, e, o.databaseClock) }},
		{"Sessions/CloseEndsAll", testSessionClose},
		{"Sessions/ExpireTogether", testSessionExpiry},
		{"Sessions/ByRef", testSessionByRef},
		{"Sessions/List", testSessionList},
		{"Sessions/ErrForbiddenToOtherKeys", testSessionOwner},
		{"Semaphore/Limit", testSemaphoreLimit},
		{"Semaphore/ConcurrentNeverOverLimit", testSemaphoreConcurrent},
		{"Sessions/Restart", func(t *testing.T, e *env) { testSessionRestart(t, e, o.databaseClock) }},
		{"LockDelay", testLockDelay},
		{"LockDelay/PerGrantInEvents", testLockDelayPerGrant},
		{"ExpireDue", testExpireDue},
		{"ExpireDue/InBoundedWrites", testExpireDueBounded},
		{"List", testList},
		{"RecentlyFreed", testRecentlyFreed},
		{"Held/FiltersAndOrders", testHeld},
		{"Held/Substrings", testHeldSubstrings},
		{"Held/NotUTF8", testHeldNotUTF8},
		{"Events/Since", testEventsSince},
		{"Events/Pagination", testEventsPagination},
		{"Prune", testPrune},
		{"Prune/Rows", testPruneRows},
		{"Prune/EndedGrants", testPruneEndedGrants},
		{"Prune/EndedSessions", testPruneEndedSessions},
		{"Resources/Fence", testResourceFence},
		{"Resources/LeaseName", testResourceLeaseName},
		{"Resources/ConcurrentWriters", testResourceConcurrent},
		{"Resources/List", testResourceList},
		{"Resources/ErrTokenNotIssued", testResourceNotIssued},
		{"Resources/Delete", testResourceDelete},
		{"Resources/Conditional", testResourceConditional},
		{"Resources/Writers", testResourceWriters},
		{"Resources/Quota", testResourceQuota},
		{"Resources/ScopedTokens", testScopedTokens},
		{"Resources/ScopedNotIssued", testScopedNotIssued},
		{"Rejections/External", testExternalRejection},
		{"Rejections/ExternalClaimsNoToken", testExternalRejectionClaimsNothing},
		{"Rejections/Key", testRejectionKey},
		{"Resources/ByLeaseAndToken", testLeaseResources},
		{"Keys/LastUsed", testKeyLastUsed},
		{"Concurrent/Contenders", testContenders},
		{"Keys/CreateFindRevoke", testKeys},
		{"Keys/BootstrapOnlyIfNone", testKeyBootstrap},
		{"Keys/Sessions", testSessions},
		{"Keys/SessionsKept", testSessionsKept},
		{"Keys/ErrLastAdmin", testLastAdmin},
		{"Keys/MaxHeldPerOwner", testMaxHeld},
		{"Keys/MaxOpenSessionsPerOwner", testMaxOpenSessions},
		{"Revoke/Actor", testRevokeActor},
		{"AcquireAll/OK", testAcquireAllOK},
		{"AcquireAll/ErrHeldTouchesNone", testAcquireAllHeld},
		{"AcquireAll/ErrLimitMismatch", testAcquireAllSemaphore},
		{"AcquireAll/Session", testAcquireAllSession},
		{"AcquireAll/MaxHeldCountsEveryGrant", testAcquireAllMaxHeld},
		{"AcquireAll/ConcurrentAllOrNothing", testAcquireAllConcurrent},
		{"AcquireAll/Shared", testAcquireAllShared},
		{"AcquireAll/SharedRefusalWritesNothing", testAcquireAllSharedRefused},
		{"AcquireAll/SharedSession", testAcquireAllSharedSession},
		{"AcquireAll/Idempotency", testAcquireAllIdempotency},
		{"AcquireAll/ConcurrentReadersAndWriters", testAcquireAllConcurrentModes},
	}
	cases = append(cases, sharedCases...)
	for _, c := range cases {
		if !strings.HasPrefix(c.name, o.only) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if o.databaseClock && c.name == "Restart/Conservative" {
				t.Skip("the backend's clock lives in its database: a process restart changes no lease")
			}
			t.Parallel()
			c.fn(t, setup(t, newDB))
		})
	}
}

func testAcquireOK(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	if !strings.HasPrefix(l.ID, lease.IDPrefix) || len(l.ID) < 30 {
		t.Errorf("ID = %q, want an unguessable lease ID", l.ID)
	}
	if !lease.ValidToken(l.Token) || l.Token < t0.UnixMicro() {
		t.Errorf("Token = %d, want ≥ %d (the token rule)", l.Token, t0.UnixMicro())
	}
	want := lease.Lease{Name: "job", Holder: "w1", ID: l.ID, Token: l.Token, TTL: 10 * time.Second,
		AcquiredAt: t0, RenewedAt: t0, ExpiresAt: t0.Add(10 * time.Second)}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Errorf("Acquire() mismatch (-want +got):\n%s", diff)
	}
	if got := types(e.events("job")); !cmp.Equal(got, []lease.EventType{lease.EventAcquired}) {
		t.Errorf("events = %v, want [acquired]", got)
	}
}

func testAcquireHeld(t *testing.T, e *env) {
	e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(9999 * time.Millisecond)
	_, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Second})
	le := wantCode(t, "Acquire(held)", err, lease.CodeHeld)
	if le.Holder != "w1" || !le.ExpiresAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("held error = holder %q expires %v, want w1 at %v", le.Holder, le.ExpiresAt, t0.Add(10*time.Second))
	}
}

func testAcquireAfterExpiry(t *testing.T, e *env) {
	a := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(10 * time.Second) // expires_at is exclusive: at expiry the lease is gone
	b := e.acquire("job", "w2", 10*time.Second)
	if b.Token <= a.Token {
		t.Errorf("second token %d, want > %d", b.Token, a.Token)
	}
	evs := e.events("job")
	if got := types(evs); !cmp.Equal(got, []lease.EventType{lease.EventAcquired, lease.EventExpired, lease.EventAcquired}) {
		t.Fatalf("events = %v", got)
	}
	if !evs[1].At.Equal(a.ExpiresAt) {
		t.Errorf("expired event at %v, want the expiry %v", evs[1].At, a.ExpiresAt)
	}
}

func testMetadata(t *testing.T, e *env) {
	md := json.RawMessage(`{"addr":"10.0.0.7:9000"}`)
	l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "leader", Holder: "a", TTL: time.Second, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.s.Get(e.ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]json.RawMessage{"lease": l.Metadata, "state": st.Metadata, "event": e.events("leader")[0].Metadata} {
		if string(got) != string(md) {
			t.Errorf("%s metadata = %s, want %s", what, got, md)
		}
	}
}

func testRenewOK(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(9 * time.Second)
	r, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil)
	if err != nil {
		t.Fatalf("Renew() = %v", err)
	}
	if r.Token != l.Token || !r.ExpiresAt.Equal(t0.Add(19*time.Second)) || r.ID != "" {
		t.Errorf("Renew() = token %d expires %v id %q, want token %d expires %v and no id", r.Token, r.ExpiresAt, r.ID, l.Token, t0.Add(19*time.Second))
	}
	r, err = e.s.Renew(e.ctx, "job", l.ID, 30*time.Second, nil)
	if err != nil || r.TTL != 30*time.Second || !r.ExpiresAt.Equal(t0.Add(39*time.Second)) {
		t.Errorf("Renew(ttl 30s) = %+v, %v", r, err)
	}
}

// testRenewMetadata: a renewal with metadata replaces the lease's (a leader proclaiming a new
// address) and its renewed event carries it; one without keeps it.
func testRenewMetadata(t *testing.T, e *env) {
	l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "leader", Holder: "n1", TTL: time.Minute, Metadata: json.RawMessage(`{"addr":"a:1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Renew(e.ctx, "leader", l.ID, 0, json.RawMessage(`{"addr":"a:2"}`)); err != nil {
		t.Fatalf("Renew(metadata) = %v", err)
	}
	r, err := e.s.Renew(e.ctx, "leader", l.ID, 0, nil)
	if err != nil || string(r.Metadata) != `{"addr":"a:2"}` || r.Token != l.Token {
		t.Errorf("Renew() after new metadata = %s token %d, %v; want {\"addr\":\"a:2\"} and the same token", r.Metadata, r.Token, err)
	}
	st, _ := e.s.Get(e.ctx, "leader")
	evs := e.events("leader")
	if string(st.Metadata) != `{"addr":"a:2"}` || string(evs[1].Metadata) != `{"addr":"a:2"}` || string(evs[2].Metadata) != `{"addr":"a:2"}` {
		t.Errorf("state metadata %s, renewed events %s and %s; want {\"addr\":\"a:2\"} in all", st.Metadata, evs[1].Metadata, evs[2].Metadata)
	}
	// Metadata on a lease acquired without any.
	l2 := e.acquire("bare", "n1", time.Minute)
	if _, err := e.s.Renew(e.ctx, "bare", l2.ID, 0, json.RawMessage(`{"k":1}`)); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.s.Get(e.ctx, "bare"); string(st.Metadata) != `{"k":1}` {
		t.Errorf("metadata of a bare lease after Renew(metadata) = %s", st.Metadata)
	}
}

func testRenewWrongID(t *testing.T, e *env) {
	a := e.acquire("a", "w1", 10*time.Second)
	e.acquire("b", "w2", 10*time.Second)
	_, err := e.s.Renew(e.ctx, "a", "lk_notanid", 0, nil)
	wantCode(t, "Renew(unknown id)", err, lease.CodeLost)
	_, err = e.s.Renew(e.ctx, "b", a.ID, 0, nil)
	wantCode(t, "Renew(id of another name)", err, lease.CodeLost)
	wantCode(t, "Release(id of another name)", e.s.Release(e.ctx, "b", a.ID), lease.CodeLost)
	if st, _ := e.s.Get(e.ctx, "b"); !st.Held || st.Holder != "w2" {
		t.Errorf("b after a foreign release = %+v, want still held by w2", st)
	}
}

func testRenewExpired(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(10 * time.Second)
	_, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil)
	wantCode(t, "Renew(expired)", err, lease.CodeLost)
	if got := types(e.events("job")); !cmp.Equal(got, []lease.EventType{lease.EventAcquired, lease.EventExpired}) {
		t.Errorf("events = %v, want [acquired expired]", got)
	}
}

func testRenewRevoked(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	if err := e.s.Revoke(e.ctx, "job", 0, "test admin"); err != nil {
		t.Fatal(err)
	}
	_, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil)
	wantCode(t, "Renew(revoked)", err, lease.CodeLost)
	wantCode(t, "Release(revoked)", e.s.Release(e.ctx, "job", l.ID), lease.CodeLost)
}

func testReleaseOK(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(time.Second)
	if err := e.s.Release(e.ctx, "job", l.ID); err != nil {
		t.Fatalf("Release() = %v", err)
	}
	if err := e.s.Release(e.ctx, "job", l.ID); err != nil {
		t.Errorf("Release(repeat) = %v, want nil", err)
	}
	st, err := e.s.Get(e.ctx, "job")
	if err != nil || st.Held || st.End != lease.EndReleased || !st.EndedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("Get() after release = %+v, %v", st, err)
	}
	n := e.acquire("job", "w2", time.Second)
	if n.Token <= l.Token {
		t.Errorf("token after release %d, want > %d", n.Token, l.Token)
	}
	if err := e.s.Release(e.ctx, "job", l.ID); err != nil {
		t.Errorf("Release(repeat after a successor) = %v, want nil", err)
	}
	if st, _ := e.s.Get(e.ctx, "job"); !st.Held || st.Holder != "w2" {
		t.Errorf("successor after the old holder's repeat release = %+v, want held by w2", st)
	}
}

func testReleaseExpired(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(11 * time.Second)
	le := wantCode(t, "Release(expired)", e.s.Release(e.ctx, "job", l.ID), lease.CodeLost)
	if !strings.Contains(le.Message, "expired") {
		t.Errorf("message %q, want it to say the lease expired", le.Message)
	}
}

func testStaleID(t *testing.T, e *env) {
	a := e.acquire("job", "w1", 2*time.Second)
	e.clock.Advance(3 * time.Second)
	b := e.acquire("job", "w2", 10*time.Second)
	_, err := e.s.Renew(e.ctx, "job", a.ID, 0, nil)
	wantCode(t, "Renew(stale id)", err, lease.CodeLost)
	wantCode(t, "Release(stale id)", e.s.Release(e.ctx, "job", a.ID), lease.CodeLost)
	st, err := e.s.Get(e.ctx, "job")
	if err != nil || !st.Held || st.Token != b.Token || !st.ExpiresAt.Equal(b.ExpiresAt) {
		t.Errorf("successor = %+v, %v; want untouched %d until %v", st, err, b.Token, b.ExpiresAt)
	}
}

func testRevoke(t *testing.T, e *env) {
	wantCode(t, "Revoke(never used)", e.s.Revoke(e.ctx, "nope", 0, "test admin"), lease.CodeNotFound)
	e.acquire("job", "w1", 10*time.Second)
	if err := e.s.Revoke(e.ctx, "job", 0, "test admin"); err != nil {
		t.Fatalf("Revoke() = %v", err)
	}
	if err := e.s.Revoke(e.ctx, "job", 0, "test admin"); err != nil {
		t.Errorf("Revoke(free) = %v, want nil", err)
	}
	if got := types(e.events("job")); !cmp.Equal(got, []lease.EventType{lease.EventAcquired, lease.EventRevoked}) {
		t.Errorf("events = %v", got)
	}
	e.acquire("job", "w2", time.Second)
}

func testGet(t *testing.T, e *env) {
	_, err := e.s.Get(e.ctx, "nope")
	wantCode(t, "Get(never used)", err, lease.CodeNotFound)
	l := e.acquire("job", "w1", 10*time.Second)
	st, err := e.s.Get(e.ctx, "job")
	if err != nil || !st.Held || st.Holder != "w1" || st.Token != l.Token {
		t.Fatalf("Get(held) = %+v, %v", st, err)
	}
	e.clock.Advance(20 * time.Second)
	st, err = e.s.Get(e.ctx, "job")
	if err != nil || st.Held || st.Holder != "w1" || st.Token != l.Token || st.End != lease.EndExpired || !st.EndedAt.Equal(l.ExpiresAt) {
		t.Errorf("Get(expired) = %+v, %v; want free with the last holder and token", st, err)
	}
}

func testTokensClockBack(t *testing.T, e *env) {
	var last int64
	for i, step := range []time.Duration{0, -time.Hour, 2 * time.Hour, -24 * time.Hour, time.Millisecond} {
		e.clock.Advance(step)
		l := e.acquire(fmt.Sprintf("n%d", i), "w", time.Second)
		if l.Token <= last {
			t.Fatalf("token %d after a clock step of %v, want > %d", l.Token, step, last)
		}
		last = l.Token
	}
}

func testTokensReopen(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(-time.Hour) // the next process starts with a wall clock an hour behind
	e.restart()
	e.clock.Advance(2 * time.Hour)
	b := e.acquire("other", "w2", time.Second)
	if b.Token <= a.Token {
		t.Errorf("token after reopen %d, want > %d", b.Token, a.Token)
	}
	e.clock.Advance(-2 * time.Hour)
	e.restart()
	c := e.acquire("third", "w3", time.Second)
	if c.Token <= b.Token {
		t.Errorf("token after reopen with the clock back %d, want > %d", c.Token, b.Token)
	}
}

func testRestartConservative(t *testing.T, e *env) {
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(8 * time.Second)
	e.restart() // restart at t0+8s: the lease must last until at least t0+18s
	e.clock.Advance(9 * time.Second)
	st, err := e.s.Get(e.ctx, "job")
	if err != nil || !st.Held || st.Token != l.Token {
		t.Fatalf("Get() 9 s after restart = %+v, %v; want still held", st, err)
	}
	if _, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil); err != nil {
		t.Errorf("Renew() after restart = %v, want the holder to keep its lease", err)
	}
}

// testRestartVisible: the holder of a lease a restart stretched learns by how much from its
// renewals and from a retried acquire; a grant made after the restart, or a backend whose
// clock lives in its database, reports nothing.
func testRestartVisible(t *testing.T, e *env, databaseClock bool) {
	p := store.AcquireParams{Name: "job", Holder: "w1", TTL: 10 * time.Second, IdempotencyKey: "k-restart"}
	l, err := e.s.Acquire(e.ctx, p)
	if err != nil || l.ExtendedByRestart != 0 {
		t.Fatalf("Acquire() = %+v, %v; want a grant no restart stretched", l, err)
	}
	e.clock.Advance(8 * time.Second)
	e.restart() // at t0+8s: expiry t0+10s becomes t0+18s
	want := 8 * time.Second
	if databaseClock {
		want = 0
	}
	e.clock.Advance(time.Second)
	again, err := e.s.Acquire(e.ctx, p)
	if err != nil || again.Token != l.Token || again.ExtendedByRestart != want {
		t.Errorf("Acquire(same key) after restart = token %d extended %v, %v; want token %d extended %v", again.Token, again.ExtendedByRestart, err, l.Token, want)
	}
	if st, err := e.s.Get(e.ctx, "job"); err != nil || st.ExtendedByRestart != want {
		t.Errorf("Get() after restart = extended %v, %v; want %v", st.ExtendedByRestart, err, want)
	}
	for i := range 2 { // the stretch stays with the grant: every renewal reports it
		r, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil)
		if err != nil || r.ExtendedByRestart != want {
			t.Errorf("Renew() #%d after restart = extended %v, %v; want %v", i+1, r.ExtendedByRestart, err, want)
		}
	}
	o := e.acquire("fresh", "w2", 10*time.Second)
	if r, err := e.s.Renew(e.ctx, "fresh", o.ID, 0, nil); err != nil || r.ExtendedByRestart != 0 {
		t.Errorf("Renew(fresh) = extended %v, %v; want 0 for a grant made after the restart", r.ExtendedByRestart, err)
	}
	// A second restart adds to the first: the renewals above set the expiry to t0+19s.
	e.clock.Advance(5 * time.Second)
	e.restart() // at t0+14s: expiry t0+19s becomes t0+24s
	if databaseClock {
		return
	}
	if r, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil); err != nil || r.ExtendedByRestart != 13*time.Second {
		t.Errorf("Renew() after a second restart = extended %v, %v; want 13s in total", r.ExtendedByRestart, err)
	}
}

func testRestartExpiredBefore(t *testing.T, e *env) {
	a := e.acquire("short", "w1", time.Second)
	e.clock.Advance(5 * time.Second)
	e.acquire("other", "w2", time.Minute) // persists the server's time, past short's expiry
	e.restart()
	st, err := e.s.Get(e.ctx, "short")
	if err != nil || st.Held {
		t.Fatalf("Get(short) = %+v, %v; want free: it expired before the crash", st, err)
	}
	evs := e.events("short")
	if got := types(evs); !cmp.Equal(got, []lease.EventType{lease.EventAcquired, lease.EventExpired}) || !evs[1].At.Equal(a.ExpiresAt) {
		t.Errorf("events = %v, want acquired then expired at %v", evs, a.ExpiresAt)
	}
	if st, _ := e.s.Get(e.ctx, "other"); !st.Held {
		t.Errorf("other after restart = %+v, want held", st)
	}
}

func testIdempotency(t *testing.T, e *env) {
	p := store.AcquireParams{Name: "job", Holder: "w1", TTL: 10 * time.Second, IdempotencyKey: "k-123"}
	a, err := e.s.Acquire(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	b, err := e.s.Acquire(e.ctx, p)
	if err != nil || b.Token != a.Token || b.ID != a.ID {
		t.Fatalf("retry = %+v, %v; want the first grant %d %q", b, err, a.Token, a.ID)
	}
	// ReplayOnly (a server's line asks it while others wait): the key's grant, or lease_held
	// with nothing written for a key that has none, on a free name or a set of free names.
	r := p
	r.ReplayOnly = true
	if b, err := e.s.Acquire(e.ctx, r); err != nil || b.ID != a.ID {
		t.Errorf("ReplayOnly retry = %+v, %v; want the first grant %q", b, err, a.ID)
	}
	r.Name, r.IdempotencyKey = "free", "k-new"
	_, err = e.s.Acquire(e.ctx, r)
	wantCode(t, "Acquire(ReplayOnly, new key)", err, lease.CodeHeld)
	_, err = e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: []string{"free", "free-2"}, Holder: "w1", TTL: time.Minute,
		IdempotencyKey: "k-new-set", ReplayOnly: true})
	wantCode(t, "AcquireAll(ReplayOnly, new key)", err, lease.CodeHeld)
	for _, n := range []string{"free", "free-2"} {
		if st, err := e.s.Get(e.ctx, n); err == nil && st.Held {
			t.Errorf("%s after refused ReplayOnly acquires: %+v, want never granted", n, st)
		}
	}
	if _, err := e.s.Renew(e.ctx, "job", b.ID, 0, nil); err != nil {
		t.Errorf("Renew(replayed id) = %v", err)
	}
	q := p
	q.Holder = "w2"
	_, err = e.s.Acquire(e.ctx, q)
	wantCode(t, "Acquire(key reused for another request)", err, lease.CodeInvalid)
	if err := e.s.Release(e.ctx, "job", a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.Acquire(e.ctx, p)
	wantCode(t, "Acquire(retry after release)", err, lease.CodeLost)
	e.clock.Advance(25 * time.Hour)
	if c, err := e.s.Acquire(e.ctx, p); err != nil || c.Token <= a.Token {
		t.Errorf("Acquire(key past 24 h) = %+v, %v; want a new grant", c, err)
	}
	if got := len(e.events("job")); got != 4 {
		t.Errorf("events = %d, want 4 (acquired renewed released acquired)", got)
	}
}

func testLockDelay(t *testing.T, e *env) {
	_, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Second, LockDelay: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	_, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Second})
	le := wantCode(t, "Acquire(in lock delay)", err, lease.CodeHeld)
	if want := t0.Add(6 * time.Second); !le.AvailableAt.Equal(want) {
		t.Errorf("available_at = %v, want %v", le.AvailableAt, want)
	}
	if st, _ := e.s.Get(e.ctx, "job"); st.Held || !st.AvailableAt.Equal(t0.Add(6*time.Second)) {
		t.Errorf("Get() in lock delay = %+v", st)
	}
	e.clock.Advance(4 * time.Second)
	e.acquire("job", "w2", time.Second)

	for _, end := range []string{"release", "revoke"} {
		name := "skip-" + end
		l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: "w1", TTL: time.Second, LockDelay: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if end == "release" {
			err = e.s.Release(e.ctx, name, l.ID)
		} else {
			err = e.s.Revoke(e.ctx, name, 0, "test admin")
		}
		if err != nil {
			t.Fatal(err)
		}
		e.acquire(name, "w2", time.Second)
	}
}

// testLockDelayPerGrant: every acquired event carries its own grant's lock delay, so an earlier
// grant's delay is still known after a later grant with another one; other events carry none.
func testLockDelayPerGrant(t *testing.T, e *env) {
	for i, d := range []time.Duration{3 * time.Second, 0, 1500 * time.Millisecond} {
		if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "job", Holder: fmt.Sprintf("w%d", i), TTL: time.Second, LockDelay: d}); err != nil {
			t.Fatalf("Acquire(lock delay %v) = %v", d, err)
		}
		e.clock.Advance(time.Second + d)
		if _, _, err := e.s.ExpireDue(e.ctx); err != nil {
			t.Fatalf("ExpireDue() = %v", err)
		}
	}
	var got []time.Duration
	for _, ev := range e.events("job") {
		switch {
		case ev.Type == lease.EventAcquired:
			got = append(got, ev.LockDelay)
		case ev.LockDelay != 0:
			t.Errorf("%s event has lock delay %v, want none", ev.Type, ev.LockDelay)
		}
	}
	if want := []time.Duration{3 * time.Second, 0, 1500 * time.Millisecond}; !cmp.Equal(got, want) {
		t.Errorf("lock delays of the acquired events = %v, want %v", got, want)
	}
}

func testExpireDue(t *testing.T, e *env) {
	a := e.acquire("a", "w", time.Second)
	e.acquire("b", "w", 5*time.Second)
	e.clock.Advance(3 * time.Second)
	n, next, err := e.s.ExpireDue(e.ctx)
	if err != nil || n != 1 || !next.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("ExpireDue() = %d, %v, %v; want 1 and next at %v", n, next, err, t0.Add(5*time.Second))
	}
	evs := e.events("a")
	if len(evs) != 2 || evs[1].Type != lease.EventExpired || !evs[1].At.Equal(a.ExpiresAt) {
		t.Errorf("events of a = %+v", evs)
	}
	if c, _ := e.s.HeldCount(e.ctx, ""); c != 1 {
		t.Errorf("HeldCount() = %d, want 1", c)
	}
	if n, _, _ := e.s.ExpireDue(e.ctx); n != 0 {
		t.Errorf("second ExpireDue() = %d, want 0", n)
	}
}

// testExpireDueBounded: a sweep records at most store.SweepLimit expiries, the earliest first,
// and then answers that more are due (next no later than now), so that a mass expiry is swept
// in bounded writes, between which other writes go on; the next sweep records the rest.
func testExpireDueBounded(t *testing.T, e *env) {
	const later = 3 // leases that expire after the first SweepLimit
	n := store.SweepLimit + later
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				ttl := time.Second
				if i >= store.SweepLimit {
					ttl = 2 * time.Second
				}
				if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: fmt.Sprintf("mass-%04d", i), Holder: "w", TTL: ttl}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Acquire() = %v", err)
	}
	e.clock.Advance(3 * time.Second)
	got, next, err := e.s.ExpireDue(e.ctx)
	if err != nil || got != store.SweepLimit || next.IsZero() || next.After(e.clock.Now()) {
		t.Fatalf("first ExpireDue() = %d, next %v, %v; want %d and next no later than now (%v)", got, next, err, store.SweepLimit, e.clock.Now())
	}
	for i := store.SweepLimit; i < n; i++ {
		if evs := e.events(fmt.Sprintf("mass-%04d", i)); len(evs) != 1 {
			t.Errorf("mass-%04d, which expired last, has events %+v after the first sweep; want its grant alone", i, evs)
		}
	}
	if got, next, err := e.s.ExpireDue(e.ctx); err != nil || got != later || !next.IsZero() {
		t.Errorf("second ExpireDue() = %d, next %v, %v; want %d and no next expiry", got, next, err, later)
	}
	if evs := e.events(fmt.Sprintf("mass-%04d", n-1)); len(evs) != 2 || evs[1].Type != lease.EventExpired {
		t.Errorf("events of the last lease after the second sweep = %+v, want its expiry", evs)
	}
	if got, _, err := e.s.ExpireDue(e.ctx); err != nil || got != 0 {
		t.Errorf("third ExpireDue() = %d, %v; want 0", got, err)
	}
}

func testList(t *testing.T, e *env) {
	for _, n := range []string{"a-1", "a-2", "a-3", "b-1", "a-4"} {
		e.acquire(n, "w-"+n, 10*time.Second)
	}
	e.clock.Advance(time.Second)
	if err := e.s.Revoke(e.ctx, "a-2", 0, "test admin"); err != nil {
		t.Fatal(err)
	}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := e.s.List(e.ctx, store.LeaseFilter{Prefix: "a-", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range p.Items {
			names = append(names, st.Name)
		}
		if cursor = p.Next; cursor == "" || pages > 5 {
			break
		}
	}
	if want := []string{"a-1", "a-2", "a-3", "a-4"}; !cmp.Equal(names, want) {
		t.Errorf("List(prefix a-) = %v, want %v", names, want)
	}
	for state, want := range map[string][]string{"held": {"a-1", "a-3", "a-4", "b-1"}, "free": {"a-2"}} {
		p, err := e.s.List(e.ctx, store.LeaseFilter{State: state})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range p.Items {
			got = append(got, st.Name)
		}
		if !cmp.Equal(got, want) {
			t.Errorf("List(state %s) = %v, want %v", state, got, want)
		}
	}
	_, err := e.s.List(e.ctx, store.LeaseFilter{Cursor: "!!"})
	wantCode(t, "List(bad cursor)", err, lease.CodeInvalid)
}

func testEventsPagination(t *testing.T, e *env) {
	l := e.acquire("job", "w", 10*time.Second)
	for range 4 {
		if _, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	cursor := ""
	for {
		p, err := e.s.Events(e.ctx, store.EventFilter{Name: "job", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range p.Items {
			seqs = append(seqs, ev.Seq)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if len(seqs) != 5 {
		t.Fatalf("paged events = %v, want 5", seqs)
	}
	var newest []int64
	cursor = ""
	for {
		p, err := e.s.Events(e.ctx, store.EventFilter{Name: "job", Limit: 2, Cursor: cursor, Newest: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range p.Items {
			newest = append(newest, ev.Seq)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if want := []int64{seqs[4], seqs[3], seqs[2], seqs[1], seqs[0]}; !cmp.Equal(newest, want) {
		t.Errorf("newest-first pages = %v, want %v", newest, want)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("seqs = %v, want increasing (oldest first)", seqs)
		}
	}
}

func testPrune(t *testing.T, e *env) {
	l := e.acquire("old", "w", time.Second)
	if err := e.s.Release(e.ctx, "old", l.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(48 * time.Hour)
	e.acquire("new", "w", time.Minute)
	if err := e.s.Prune(e.ctx, store.Retention{Age: 24 * time.Hour}); err != nil {
		t.Fatalf("Prune() = %v", err)
	}
	if got := e.events("old"); len(got) != 0 {
		t.Errorf("old events after prune = %v, want none", got)
	}
	if got := e.events("new"); len(got) != 1 {
		t.Errorf("new events after prune = %v, want 1", got)
	}
	if st, err := e.s.Get(e.ctx, "old"); err != nil || st.Token != l.Token {
		t.Errorf("Get(old) after prune = %+v, %v; want its last grant kept", st, err)
	}
}

func (e *env) put(name string, token int64, leaseName, value string) (lease.Resource, error) {
	return e.s.PutResource(e.ctx, store.ResourceWrite{Name: name, Token: token, LeaseName: leaseName,
		Value: []byte(value), ContentType: "text/plain", ClientAddr: "127.0.0.1:5000", UserAgent: "test"})
}

func testResourceFence(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Second)
	if r, err := e.put("db", b.Token, "", "v1"); err != nil || r.Fence != b.Token || r.Version != 1 || r.Holder != "w2" {
		t.Fatalf("PutResource(b) = %+v, %v", r, err)
	}
	if r, err := e.put("db", b.Token, "", "v2"); err != nil || r.Version != 2 {
		t.Fatalf("PutResource(equal token) = %+v, %v; want accepted", r, err)
	}
	_, err := e.put("db", a.Token, "", "stale")
	le := wantCode(t, "PutResource(stale)", err, lease.CodeStale)
	if le.PresentedToken != a.Token || le.CurrentFence != b.Token {
		t.Errorf("stale error = %d / %d, want %d / %d", le.PresentedToken, le.CurrentFence, a.Token, b.Token)
	}
	r, err := e.s.GetResource(e.ctx, "db")
	if err != nil || string(r.Value) != "v2" || r.Fence != b.Token || r.Version != 2 || r.ContentType != "text/plain" {
		t.Errorf("GetResource() = %+v, %v; want v2 untouched by the stale write", r, err)
	}
	p, err := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "db"})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("Rejections() = %+v, %v", p, err)
	}
	got := p.Items[0]
	want := lease.Rejection{ID: got.ID, Resource: "db", Lease: "job", PresentedToken: a.Token, CurrentFence: b.Token, Holder: "w1",
		ClientAddr: "127.0.0.1:5000", UserAgent: "test", Reason: got.Reason, At: t0.Add(2 * time.Second), Source: lease.RejectionSourceServer}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rejection mismatch (-want +got):\n%s", diff)
	}
	evs := e.events("job")
	if last := evs[len(evs)-1]; last.Type != lease.EventRejected || last.Token != a.Token || last.Resource != "db" {
		t.Errorf("last event = %+v, want rejected with the stale token", last)
	}
	_, err = e.s.GetResource(e.ctx, "nope")
	wantCode(t, "GetResource(never written)", err, lease.CodeNotFound)
}

// testResourceConditional: IfVersion and IfAbsent hold in the write's transaction, after the
// fence: a stale token is stale_token (and recorded) whatever the condition, and a failed
// condition writes nothing and records no rejection.
func testResourceConditional(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Minute)
	put := func(token, ifVersion int64, ifAbsent bool, value string) (lease.Resource, error) {
		return e.s.PutResource(e.ctx, store.ResourceWrite{Name: "cond", Token: token, Value: []byte(value),
			ContentType: "text/plain", IfVersion: ifVersion, IfAbsent: ifAbsent})
	}
	_, err := put(b.Token, 1, false, "x")
	wantCode(t, "PutResource(IfVersion 1, absent)", err, lease.CodePreconditionFailed)
	if _, err := e.s.GetResource(e.ctx, "cond"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Fatalf("GetResource() after a failed condition = %v, want not_found", err)
	}
	if r, err := put(b.Token, 0, true, "v1"); err != nil || r.Version != 1 {
		t.Fatalf("PutResource(IfAbsent, absent) = %+v, %v; want version 1", r, err)
	}
	_, err = put(b.Token, 0, true, "again")
	wantCode(t, "PutResource(IfAbsent, exists)", err, lease.CodePreconditionFailed)
	_, err = put(b.Token, 2, false, "x")
	wantCode(t, "PutResource(IfVersion 2, at 1)", err, lease.CodePreconditionFailed)
	_, err = put(a.Token, 1, false, "stale")
	wantCode(t, "PutResource(stale token, matching IfVersion)", err, lease.CodeStale)
	_, err = put(a.Token, 2, false, "stale")
	wantCode(t, "PutResource(stale token, failing IfVersion)", err, lease.CodeStale)
	if r, err := put(b.Token, 1, false, "v2"); err != nil || r.Version != 2 {
		t.Fatalf("PutResource(IfVersion 1, at 1) = %+v, %v; want version 2", r, err)
	}
	r, err := e.s.GetResource(e.ctx, "cond")
	if err != nil || string(r.Value) != "v2" || r.Version != 2 {
		t.Errorf("GetResource() = %+v, %v; want v2 at version 2", r, err)
	}
	p, err := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "cond"})
	if err != nil || len(p.Items) != 2 {
		t.Errorf("Rejections() = %d, %v; want the 2 stale writes only", len(p.Items), err)
	}
}

func testResourceLeaseName(t *testing.T, e *env) {
	a := e.acquire("job", "w1", 10*time.Second)
	if _, err := e.put("r", a.Token, "job", "ok"); err != nil {
		t.Fatalf("PutResource(current lease) = %v", err)
	}
	b := e.acquire("job2", "w2", 10*time.Second)
	_, err := e.put("r", b.Token, "job", "not the lease's token")
	wantCode(t, "PutResource(token not the lease's)", err, lease.CodeStale)
	_, err = e.put("r", a.Token, "other", "unknown lease")
	wantCode(t, "PutResource(lease never taken)", err, lease.CodeStale)
	e.clock.Advance(10 * time.Second)
	_, err = e.put("r", a.Token, "job", "expired")
	wantCode(t, "PutResource(expired lease)", err, lease.CodeStale)
	if r, _ := e.s.GetResource(e.ctx, "r"); string(r.Value) != "ok" {
		t.Errorf("value = %q, want ok", r.Value)
	}
	if p, _ := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "r"}); len(p.Items) != 3 {
		t.Errorf("rejections = %d, want 3", len(p.Items))
	}
}

func testResourceConcurrent(t *testing.T, e *env) {
	e.acquire("issuer", "w", time.Second) // issues a token above all those written below
	var wg sync.WaitGroup
	const writers = 16
	var mu sync.Mutex
	applied := map[int64]int64{} // version → token of each accepted write
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				tok := int64((j*writers+i*7)%80 + 1)
				if r, err := e.put("shared", tok, "", fmt.Sprint(tok)); err == nil {
					mu.Lock()
					if prev, dup := applied[r.Version]; dup {
						t.Errorf("two writes answered version %d (tokens %d and %d)", r.Version, prev, tok)
					}
					applied[r.Version] = tok
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// In version order, the accepted writes' tokens never go down (invariant 7).
	var last int64
	for v := int64(1); v <= int64(len(applied)); v++ {
		tok, ok := applied[v]
		if !ok {
			t.Errorf("no accepted write answered version %d of %d", v, len(applied))
			continue
		}
		if tok < last {
			t.Errorf("version %d applied token %d after token %d", v, tok, last)
		}
		last = tok
	}
	r, err := e.s.GetResource(e.ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if r.Fence != 80 || string(r.Value) != "80" {
		t.Errorf("final = fence %d value %q, want the highest token 80", r.Fence, r.Value)
	}
	p, _ := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "shared", Limit: store.MaxLimit})
	for _, rej := range p.Items {
		if rej.PresentedToken >= rej.CurrentFence {
			t.Errorf("rejection %+v: token not below the fence", rej)
		}
	}
	if int(r.Version)+len(p.Items) != writers*5 {
		t.Errorf("accepted %d + rejected %d, want %d writes accounted for", r.Version, len(p.Items), writers*5)
	}
}

func testResourceList(t *testing.T, e *env) {
	e.acquire("issuer", "w", time.Second)
	for i, n := range []string{"r1", "r2", "x"} {
		if _, err := e.put(n, int64(i+1), "", "v"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := e.s.ListResources(e.ctx, store.ResourceFilter{Prefix: "r", Limit: 1})
	if err != nil || len(p.Items) != 1 || p.Items[0].Name != "r1" || p.Next == "" {
		t.Fatalf("ListResources() = %+v, %v", p, err)
	}
	p, err = e.s.ListResources(e.ctx, store.ResourceFilter{Prefix: "r", Cursor: p.Next})
	if err != nil || len(p.Items) != 1 || p.Items[0].Name != "r2" || p.Next != "" || p.Items[0].Size != 1 {
		t.Errorf("ListResources(page 2) = %+v, %v", p, err)
	}
}

func testExternalRejection(t *testing.T, e *env) {
	a := e.acquire("job", "w1", 10*time.Second)
	r, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "orders-db", PresentedToken: a.Token, CurrentFence: a.Token + 5,
		Reason: "row fence", Source: lease.RejectionSourceExternal, ClientAddr: "10.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lease != "job" || r.Holder != "w1" || r.ID == 0 {
		t.Errorf("RecordRejection() = %+v, want lease and holder looked up by token", r)
	}
	p, _ := e.s.Rejections(e.ctx, store.RejectionFilter{Lease: "job", Since: t0})
	if len(p.Items) != 1 || p.Items[0].Source != lease.RejectionSourceExternal {
		t.Errorf("Rejections(lease job) = %+v", p.Items)
	}
	if p, _ := e.s.Rejections(e.ctx, store.RejectionFilter{Since: t0.Add(time.Hour)}); len(p.Items) != 0 {
		t.Errorf("Rejections(since later) = %+v, want none", p.Items)
	}
}

// testResourceNotIssued: a token above every token issued would raise the fence past every
// grant to come, so the resource would refuse all of them: it is refused and recorded.
func testResourceNotIssued(t *testing.T, e *env) {
	a := e.acquire("job", "w1", 10*time.Second)
	if _, err := e.put("db", a.Token, "", "v1"); err != nil {
		t.Fatalf("PutResource(issued token) = %v", err)
	}
	for _, tok := range []int64{a.Token + 1, lease.MaxToken} {
		_, err := e.put("db", tok, "", "bricks it")
		le := wantCode(t, fmt.Sprintf("PutResource(token %d, never issued)", tok), err, lease.CodeNotIssued)
		if le.PresentedToken != tok || le.CurrentFence != a.Token {
			t.Errorf("error tokens = %d / %d, want %d / %d", le.PresentedToken, le.CurrentFence, tok, a.Token)
		}
		_, err = e.put("fresh", tok, "job", "with a lease name")
		wantCode(t, fmt.Sprintf("PutResource(token %d, never issued, Lease-Name)", tok), err, lease.CodeNotIssued)
	}
	r, err := e.s.GetResource(e.ctx, "db")
	if err != nil || string(r.Value) != "v1" || r.Fence != a.Token || r.Version != 1 {
		t.Errorf("GetResource() = %+v, %v; want v1 at fence %d, untouched", r, err, a.Token)
	}
	if _, err := e.s.GetResource(e.ctx, "fresh"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("GetResource(fresh) = %v, want not_found: a refused first write creates nothing", err)
	}
	p, err := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "db"})
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("Rejections(db) = %+v, %v; want 2", p, err)
	}
	if got := p.Items[0]; got.PresentedToken != lease.MaxToken || got.CurrentFence != a.Token || !strings.Contains(got.Reason, "never issued") {
		t.Errorf("newest rejection = %+v, want token %d at fence %d, reason saying it was never issued", got, lease.MaxToken, a.Token)
	}
	var rejected int
	all, _ := e.s.Events(e.ctx, store.EventFilter{Limit: store.MaxLimit})
	for _, ev := range all.Items {
		if ev.Type == lease.EventRejected && ev.Resource == "db" {
			rejected++
		}
	}
	if rejected != 2 {
		t.Errorf("rejected events of db = %d, want 2", rejected)
	}
	// The next grant's token is issued: from then on it writes like any other.
	e.clock.Advance(10 * time.Second)
	b := e.acquire("job", "w2", 10*time.Second)
	if r, err := e.put("db", b.Token, "job", "v2"); err != nil || r.Fence != b.Token {
		t.Errorf("PutResource(the next grant's token) = %+v, %v; want accepted", r, err)
	}
	e.restart()
	_, err = e.put("db", b.Token+1, "", "after a restart")
	wantCode(t, "PutResource(never issued, after a restart)", err, lease.CodeNotIssued)
}

func testResourceDelete(t *testing.T, e *env) {
	wantCode(t, "DeleteResource(never written)", e.s.DeleteResource(e.ctx, "db", "ops (key_1)"), lease.CodeNotFound)
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Second)
	if _, err := e.put("db", b.Token, "", "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.put("db", a.Token, "", "stale"); !lease.IsCode(err, lease.CodeStale) {
		t.Fatalf("PutResource(stale) = %v, want stale_token", err)
	}
	if err := e.s.DeleteResource(e.ctx, "db", "ops (key_1)"); err != nil {
		t.Fatalf("DeleteResource() = %v", err)
	}
	if _, err := e.s.GetResource(e.ctx, "db"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("GetResource(deleted) = %v, want not_found", err)
	}
	wantCode(t, "DeleteResource(again)", e.s.DeleteResource(e.ctx, "db", "ops (key_1)"), lease.CodeNotFound)
	// The fence went with it: the lower token writes, and the resource starts again.
	r, err := e.put("db", a.Token, "", "again")
	if err != nil || r.Fence != a.Token || r.Version != 1 {
		t.Errorf("PutResource(lower token after delete) = %+v, %v; want version 1 at fence %d", r, err, a.Token)
	}
	if p, _ := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "db"}); len(p.Items) != 1 {
		t.Errorf("rejections of db after delete = %d, want the 1 recorded before", len(p.Items))
	}
	// The deletion is audited: who did it, on which resource.
	p, err := e.s.Events(e.ctx, store.EventFilter{Newest: true, Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for _, ev := range p.Items {
		if ev.Type == lease.EventResourceDeleted {
			audit = append(audit, ev.Resource+" by "+ev.Actor)
		}
	}
	if len(audit) != 1 || audit[0] != "db by ops (key_1)" {
		t.Errorf("resource_deleted events = %q, want one, of db by ops (key_1)", audit)
	}
}

// testExternalRejectionClaimsNothing: a reported rejection is a record, not a write: tokens it
// names, however high, raise no fence and move no token.
func testExternalRejectionClaimsNothing(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	if _, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "db", Lease: "job", PresentedToken: lease.MaxToken - 1,
		CurrentFence: lease.MaxToken, Source: lease.RejectionSourceExternal}, nil); err != nil {
		t.Fatalf("RecordRejection(tokens never issued) = %v", err)
	}
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Second)
	if b.Token <= a.Token || b.Token > t0.Add(2*time.Second).UnixMicro() {
		t.Errorf("token after the report = %d, want the token rule's %d", b.Token, t0.Add(2*time.Second).UnixMicro())
	}
	if _, err := e.put("db", b.Token, "job", "v"); err != nil {
		t.Errorf("PutResource(db) after the report = %v, want accepted", err)
	}
}

// testContenders: goroutines contend on a few names while the clock moves; the history must
// show strictly increasing tokens and no grant beginning before the previous one ended.
func testContenders(t *testing.T, e *env) {
	names := []string{"x", "y", "z"}
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				name := names[(g+i)%len(names)]
				l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: fmt.Sprintf("g%d", g), TTL: time.Second})
				if err != nil {
					if !lease.IsCode(err, lease.CodeHeld) {
						t.Errorf("Acquire() = %v", err)
					}
					e.clock.Advance(50 * time.Millisecond)
					continue
				}
				if i%3 == 0 {
					e.s.Release(e.ctx, name, l.ID)
				} else if i%3 == 1 {
					e.s.Renew(e.ctx, name, l.ID, 0, nil)
				}
			}
		}()
	}
	wg.Wait()
	e.clock.Advance(time.Hour)
	if _, _, err := e.s.ExpireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := CheckHistory(e.events(n)); err != nil {
			t.Errorf("history of %q: %v", n, err)
		}
	}
}

// CheckHistory checks the event rules of docs/DESIGN.md on one name's events, oldest first: per
// token acquired → (renewed…) → one end; tokens strictly increase; the next acquired is never
// earlier than the previous end; and at most one lease is open at a time.
func CheckHistory(evs []lease.Event) error {
	var open bool
	var token int64
	var endAt time.Time
	for _, ev := range evs {
		switch ev.Type {
		case lease.EventAcquired:
			if open {
				return fmt.Errorf("seq %d: acquired token %d while token %d is open", ev.Seq, ev.Token, token)
			}
			if ev.Token <= token {
				return fmt.Errorf("seq %d: token %d not above the previous %d", ev.Seq, ev.Token, token)
			}
			if ev.At.Before(endAt) {
				return fmt.Errorf("seq %d: acquired at %v before the previous end %v", ev.Seq, ev.At, endAt)
			}
			open, token = true, ev.Token
		case lease.EventRenewed:
			if !open || ev.Token != token {
				return fmt.Errorf("seq %d: renewed token %d that is not open", ev.Seq, ev.Token)
			}
		case lease.EventReleased, lease.EventExpired, lease.EventRevoked:
			if !open || ev.Token != token {
				return fmt.Errorf("seq %d: %s token %d that is not open", ev.Seq, ev.Type, ev.Token)
			}
			open, endAt = false, ev.At
		case lease.EventRejected:
		default:
			return fmt.Errorf("seq %d: unknown type %q", ev.Seq, ev.Type)
		}
	}
	return nil
}

func testRecentlyFreed(t *testing.T, e *env) {
	a := e.acquire("a", "wa", 10*time.Second)
	e.acquire("b", "wb", 2*time.Second)
	e.acquire("c", "wc", time.Minute)
	e.acquire("x-d", "wd", time.Minute)
	e.clock.Advance(time.Second)
	if err := e.s.Release(e.ctx, "a", a.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second) // b expires, not yet recorded by a sweep
	if err := e.s.Revoke(e.ctx, "x-d", 0, "test admin"); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.RecentlyFreed(e.ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range got {
		names = append(names, st.Name+":"+string(st.End))
	}
	if want := []string{"x-d:revoked", "b:expired", "a:released"}; !cmp.Equal(names, want) {
		t.Errorf("RecentlyFreed() = %v, want %v (newest first, held c left out)", names, want)
	}
	e.acquire("a", "wa2", time.Minute)
	got, _ = e.s.RecentlyFreed(e.ctx, "", 10)
	for _, st := range got {
		if st.Name == "a" {
			t.Errorf("RecentlyFreed() lists a, which is held again")
		}
	}
	if got, _ := e.s.RecentlyFreed(e.ctx, "x-", 10); len(got) != 1 || got[0].Name != "x-d" {
		t.Errorf("RecentlyFreed(prefix x-) = %+v", got)
	}
	if n, _ := e.s.HeldCount(e.ctx, "c"); n != 1 {
		t.Errorf("HeldCount(prefix c) = %d, want 1", n)
	}
	// A lease past expiry that no sweep has recorded yet is not counted under its prefix.
	e.acquire("p-1", "w", time.Second)
	e.acquire("p-2", "w", time.Minute)
	e.clock.Advance(2 * time.Second)
	if n, _ := e.s.HeldCount(e.ctx, "p-"); n != 1 {
		t.Errorf("HeldCount(prefix p-) with p-1 expired but not swept = %d, want 1", n)
	}
}

func testEventsSince(t *testing.T, e *env) {
	l := e.acquire("job", "w", time.Hour)
	e.clock.Advance(30 * time.Minute)
	if _, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	p, err := e.s.Events(e.ctx, store.EventFilter{Name: "job", Since: t0.Add(time.Minute)})
	if err != nil || len(p.Items) != 1 || p.Items[0].Type != lease.EventRenewed {
		t.Errorf("Events(since) = %+v, %v; want only the renewal", p.Items, err)
	}
}

func testRevokeByToken(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Minute)
	wantCode(t, "Revoke(the expired grant's token)", e.s.Revoke(e.ctx, "job", a.Token, "test admin"), lease.CodeLost)
	if st, _ := e.s.Get(e.ctx, "job"); !st.Held || st.Token != b.Token {
		t.Fatalf("successor after a revoke aimed at its predecessor = %+v, want still held", st)
	}
	if err := e.s.Revoke(e.ctx, "job", b.Token, "test admin"); err != nil {
		t.Fatalf("Revoke(current token) = %v", err)
	}
	wantCode(t, "Revoke(token already revoked)", e.s.Revoke(e.ctx, "job", b.Token, "test admin"), lease.CodeLost)
}

func testPruneRows(t *testing.T, e *env) {
	for i := range 5 {
		e.acquire(fmt.Sprintf("n%d", i), "w", time.Minute)
		if _, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "r", PresentedToken: 1, CurrentFence: int64(2 + i), Source: lease.RejectionSourceExternal}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.Prune(e.ctx, store.Retention{Rows: 3}); err != nil {
		t.Fatalf("Prune(rows 3) = %v", err)
	}
	evs, err := e.s.Events(e.ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 3 || evs.Items[2].Type != lease.EventRejected || evs.Items[1].Name != "n4" {
		t.Errorf("events after Prune(rows 3) = %+v, want the newest 3", evs.Items)
	}
	rej, err := e.s.Rejections(e.ctx, store.RejectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rej.Items) != 3 || rej.Items[0].CurrentFence != 6 {
		t.Errorf("rejections after Prune(rows 3) = %+v, want the newest 3", rej.Items)
	}
	for i := range 5 {
		if st, err := e.s.Get(e.ctx, fmt.Sprintf("n%d", i)); err != nil || !st.Held {
			t.Errorf("lease n%d after pruning history = %+v, %v; want untouched", i, st, err)
		}
	}
}

// testPruneEndedGrants: prune by rows keeps the newest ended grants and deletes the older ones,
// but never a name's last grant nor an open one, however old; prune by age deletes ended
// grants that ended before the cut and keeps a name's last. Whether a grant is kept shows in
// a rejection reported with its token alone: its lease is named only while the grant is known.
func testPruneEndedGrants(t *testing.T, e *env) {
	old := e.acquire("old", "w", time.Hour) // open throughout, the oldest grant
	var cyc []lease.Lease
	for range 6 {
		e.clock.Advance(time.Second)
		l := e.acquire("cyc", "w", time.Minute)
		e.clock.Advance(time.Second)
		if err := e.s.Release(e.ctx, "cyc", l.ID); err != nil {
			t.Fatal(err)
		}
		cyc = append(cyc, l)
	}
	known := func(l lease.Lease) bool {
		t.Helper()
		r, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "r", PresentedToken: l.Token, CurrentFence: l.Token + 1,
			Source: lease.RejectionSourceExternal}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Lease != ""
	}
	for i, l := range cyc {
		if !known(l) {
			t.Fatalf("grant %d of cyc unknown before any prune", i)
		}
	}
	// Keep 3: the 3 newest ended grants stay (cyc 3, 4, 5: the last is also the name's).
	if err := e.s.Prune(e.ctx, store.Retention{Rows: 3}); err != nil {
		t.Fatalf("Prune(rows 3) = %v", err)
	}
	for i, l := range cyc {
		if got, want := known(l), i >= 3; got != want {
			t.Errorf("after Prune(rows 3): grant %d of cyc known %v, want %v", i, got, want)
		}
	}
	if !known(old) {
		t.Error("after Prune(rows 3): the oldest grant, still open, was pruned")
	}
	// Keep 1: only the name's last grant, which would stay anyway.
	if err := e.s.Prune(e.ctx, store.Retention{Rows: 1}); err != nil {
		t.Fatalf("Prune(rows 1) = %v", err)
	}
	for i, l := range cyc {
		if got, want := known(l), i == 5; got != want {
			t.Errorf("after Prune(rows 1): grant %d of cyc known %v, want %v", i, got, want)
		}
	}
	// By age: an ended grant of another name goes once it is older than the cut; the names'
	// last grants stay.
	e.clock.Advance(time.Second)
	a := e.acquire("cyc", "w", time.Minute) // cyc's last grant is now a, and cyc[5] an old one
	e.clock.Advance(48 * time.Hour)
	if err := e.s.Prune(e.ctx, store.Retention{Age: 24 * time.Hour}); err != nil {
		t.Fatalf("Prune(age) = %v", err)
	}
	if known(cyc[5]) || !known(a) || !known(old) {
		t.Errorf("after Prune(age): the ended grant known %v, the name's last %v, the open one %v; want false, true, true",
			known(cyc[5]), known(a), known(old))
	}
	if st, err := e.s.Get(e.ctx, "cyc"); err != nil || st.Token != a.Token {
		t.Errorf("Get(cyc) after the prunes = %+v, %v; want its last grant, token %d", st, err, a.Token)
	}
}

// testPruneEndedSessions: prune by rows keeps the newest ended sessions (closed, or past their
// expiry) and deletes the older ones, never an open one however old.
func testPruneEndedSessions(t *testing.T, e *env) {
	open := e.openSession("long", time.Hour)
	var ended []lease.Session
	for i := range 5 {
		e.clock.Advance(time.Second)
		ss := e.openSession(fmt.Sprintf("p%d", i), 2*time.Second)
		if i%2 == 0 {
			if _, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		ended = append(ended, ss)
	}
	e.clock.Advance(3 * time.Second) // the unclosed ones are past their expiry
	if err := e.s.Prune(e.ctx, store.Retention{Rows: 3}); err != nil {
		t.Fatalf("Prune(rows 3) = %v", err)
	}
	for i, ss := range ended {
		_, _, err := e.s.SessionByRef(e.ctx, ss.Ref)
		if kept := err == nil; kept != (i >= 2) {
			t.Errorf("after Prune(rows 3): ended session %d kept %v (%v), want %v", i, kept, err, i >= 2)
		}
	}
	if _, _, err := e.s.SessionByRef(e.ctx, open.Ref); err != nil {
		t.Errorf("after Prune(rows 3): the open session = %v, want it kept", err)
	}
}

// testHandover: a handover request reaches the holder's renewals (across a restart) and the
// history, ends nothing, and goes with its grant.
func testHandover(t *testing.T, e *env) {
	req := lease.Handover{To: "w2", Reason: "deploy", By: "ops (key_1)"}
	_, err := e.s.RequestHandover(e.ctx, "job", req)
	wantCode(t, "RequestHandover(never used)", err, lease.CodeNotFound)
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(time.Second)
	h, err := e.s.RequestHandover(e.ctx, "job", req)
	want := lease.Handover{Name: "job", Holder: "w1", Token: l.Token, To: "w2", Reason: "deploy", By: "ops (key_1)", At: t0.Add(time.Second)}
	if err != nil || !cmp.Equal(h, want) {
		t.Fatalf("RequestHandover() = %+v, %v; want %+v", h, err, want)
	}
	if st, err := e.s.Get(e.ctx, "job"); err != nil || !st.Held || !st.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("Get() after the request = %+v, %v; want the lease held, unchanged", st, err)
	}
	// To the holder itself: refused, recording nothing (the events below).
	_, err = e.s.RequestHandover(e.ctx, "job", lease.Handover{To: "w1", By: req.By})
	wantCode(t, "RequestHandover(to the holder)", err, lease.CodeInvalid)
	for _, restart := range []bool{false, true} {
		if restart {
			e.restart()
		}
		r, err := e.s.Renew(e.ctx, "job", l.ID, 0, nil)
		if err != nil || r.Handover == nil || !cmp.Equal(*r.Handover, want) {
			t.Errorf("Renew() after the request (restarted %v) = handover %+v, %v; want %+v", restart, r.Handover, err, want)
		}
	}
	evs := e.events("job")
	if got := types(evs); !cmp.Equal(got, []lease.EventType{lease.EventAcquired, lease.EventHandoverRequested, lease.EventRenewed, lease.EventRenewed}) {
		t.Fatalf("events = %v, want acquired, handover_requested, renewed", got)
	}
	if ev := evs[1]; ev.Token != l.Token || ev.Holder != "w1" || ev.Actor != req.By || ev.Handover == nil ||
		ev.Handover.To != "w2" || ev.Handover.Reason != "deploy" {
		t.Errorf("handover_requested event = %+v (handover %+v), want token %d, holder w1, actor, to and reason", ev, ev.Handover, l.Token)
	}
	if err := e.s.Release(e.ctx, "job", l.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.RequestHandover(e.ctx, "job", req)
	wantCode(t, "RequestHandover(free)", err, lease.CodeNotHeld)
	n := e.acquire("job", "w2", 10*time.Second)
	if r, err := e.s.Renew(e.ctx, "job", n.ID, 0, nil); err != nil || r.Handover != nil {
		t.Errorf("Renew() of the next grant = handover %+v, %v; want none: a request goes with its grant", r.Handover, err)
	}
}

func (e *env) openSession(holder string, ttl time.Duration) lease.Session {
	e.t.Helper()
	ss, err := e.s.OpenSession(e.ctx, store.SessionParams{Holder: holder, TTL: ttl})
	if err != nil || !strings.HasPrefix(ss.ID, lease.SessionIDPrefix) || !strings.HasPrefix(ss.Ref, lease.SessionRefPrefix) {
		e.t.Fatalf("OpenSession() = %+v, %v; want a session with a secret ID and a ref", ss, err)
	}
	return ss
}

func (e *env) acquireIn(ss lease.Session, name string) lease.Lease {
	e.t.Helper()
	l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: ss.Holder, SessionID: ss.ID})
	if err != nil {
		e.t.Fatalf("Acquire(%q) under session %s = %v", name, ss.Ref, err)
	}
	return l
}

// testSessionClose: closing a session releases every lease held under it in one transaction
// (invariant S1), and nothing else.
func testSessionClose(t *testing.T, e *env) {
	ss := e.openSession("proc-1", 10*time.Second)
	e.clock.Advance(time.Second)
	a, b := e.acquireIn(ss, "a"), e.acquireIn(ss, "b")
	if a.Session != ss.Ref || !a.ExpiresAt.Equal(ss.ExpiresAt) {
		t.Errorf("lease under a session = session %q expires %v, want %s and the session's %v", a.Session, a.ExpiresAt, ss.Ref, ss.ExpiresAt)
	}
	c := e.acquire("c", "other", 10*time.Second)
	e.clock.Advance(time.Second)
	closed, err := e.s.CloseSession(e.ctx, ss.ID, "")
	if err != nil || closed.Leases != 2 || !closed.ClosedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("CloseSession() = %+v, %v; want 2 leases released at t0+2s", closed, err)
	}
	for _, l := range []lease.Lease{a, b} {
		st, err := e.s.Get(e.ctx, l.Name)
		evs := e.events(l.Name)
		last := evs[len(evs)-1]
		if err != nil || st.Held || st.End != lease.EndReleased || last.Type != lease.EventReleased || last.Session != ss.Ref ||
			!last.At.Equal(closed.ClosedAt) {
			t.Errorf("%s after the close = %+v (last event %+v), %v; want released at the close, naming the session", l.Name, st, last, err)
		}
	}
	if st, _ := e.s.Get(e.ctx, "c"); !st.Held || st.Token != c.Token {
		t.Errorf("c, held outside the session, = %+v; want still held", st)
	}
	if again, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil || again.Leases != 0 {
		t.Errorf("CloseSession() again = %+v, %v; want nothing done, no error", again, err)
	}
	_, err = e.s.RenewSession(e.ctx, ss.ID, "", 0)
	wantCode(t, "RenewSession(closed)", err, lease.CodeSessionLost)
	_, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: "d", Holder: "proc-1", SessionID: ss.ID})
	wantCode(t, "Acquire(closed session)", err, lease.CodeSessionLost)
	_, err = e.s.CloseSession(e.ctx, lease.NewSessionID(), "")
	wantCode(t, "CloseSession(unknown)", err, lease.CodeNotFound)
}

// testSessionByRef: a viewer finds a session by its public name, with its holder, ttl and the
// leases held under it, and each lease's state names its session, before and after the close.
func testSessionByRef(t *testing.T, e *env) {
	ss := e.openSession("proc-1", 10*time.Second)
	a, b := e.acquireIn(ss, "a"), e.acquireIn(ss, "b")
	e.acquire("c", "other", 10*time.Second)
	got, sts, err := e.s.SessionByRef(e.ctx, ss.Ref)
	if err != nil || got.Ref != ss.Ref || got.Holder != "proc-1" || got.TTL != 10*time.Second || got.Leases != 2 ||
		!got.ExpiresAt.Equal(ss.ExpiresAt) || got.ID != "" {
		t.Fatalf("SessionByRef() = %+v, %v; want proc-1's open session of 10s with 2 leases, no ID", got, err)
	}
	names := func(sts []lease.State) (out []string) {
		for _, st := range sts {
			out = append(out, fmt.Sprintf("%s held=%v token=%d session=%s", st.Name, st.Held, st.Token, st.Session))
		}
		return out
	}
	want := []string{fmt.Sprintf("a held=true token=%d session=%s", a.Token, ss.Ref), fmt.Sprintf("b held=true token=%d session=%s", b.Token, ss.Ref)}
	if diff := cmp.Diff(want, names(sts)); diff != "" {
		t.Errorf("SessionByRef() leases (-want +got):\n%s", diff)
	}
	if st, err := e.s.Get(e.ctx, "a"); err != nil || st.Session != ss.Ref {
		t.Errorf("Get(a) = session %q, %v; want %s", st.Session, err, ss.Ref)
	}
	if st, err := e.s.Get(e.ctx, "c"); err != nil || st.Session != "" {
		t.Errorf("Get(c) = session %q, %v; want none", st.Session, err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil {
		t.Fatal(err)
	}
	got, sts, err = e.s.SessionByRef(e.ctx, ss.Ref)
	want = []string{fmt.Sprintf("a held=false token=%d session=%s", a.Token, ss.Ref), fmt.Sprintf("b held=false token=%d session=%s", b.Token, ss.Ref)}
	if err != nil || got.ClosedAt.IsZero() || got.Leases != 0 || !cmp.Equal(want, names(sts)) {
		t.Errorf("SessionByRef() after the close = %+v %v, %v; want closed, its leases %v", got, names(sts), err, want)
	}
	_, _, err = e.s.SessionByRef(e.ctx, lease.SessionRef(lease.HashID(lease.NewSessionID())))
	wantCode(t, "SessionByRef(unknown)", err, lease.CodeNotFound)
}

// testSessionExpiry: a lease held under a session expires with it, never before nor after
// (invariant S2): renewing the session renews its leases, and their expiry names the session.
func testSessionExpiry(t *testing.T, e *env) {
	ss := e.openSession("proc-1", 10*time.Second)
	e.clock.Advance(2 * time.Second)
	a := e.acquireIn(ss, "a")
	if !a.ExpiresAt.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("lease expires %v, want with its session at t0+10s", a.ExpiresAt)
	}
	_, err := e.s.Renew(e.ctx, "a", a.ID, 0, nil)
	wantCode(t, "Renew(a lease under a session)", err, lease.CodeInvalid)
	e.clock.Advance(5 * time.Second)
	r, err := e.s.RenewSession(e.ctx, ss.ID, "", 0)
	if err != nil || r.Leases != 1 || !r.ExpiresAt.Equal(t0.Add(17*time.Second)) {
		t.Fatalf("RenewSession() = %+v, %v; want 1 lease, expiry t0+17s", r, err)
	}
	if st, err := e.s.Get(e.ctx, "a"); err != nil || !st.Held || !st.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("Get(a) after the session's renewal = %+v, %v; want held until %v", st, err, r.ExpiresAt)
	}
	e.clock.Advance(10*time.Second - time.Millisecond)
	if st, _ := e.s.Get(e.ctx, "a"); !st.Held {
		t.Errorf("Get(a) 1 ms before the session expires = %+v, want held", st)
	}
	e.clock.Advance(time.Millisecond)
	if _, _, err := e.s.ExpireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	evs := e.events("a")
	if last := evs[len(evs)-1]; last.Type != lease.EventExpired || !last.At.Equal(r.ExpiresAt) || last.Session != ss.Ref {
		t.Errorf("last event of a = %+v, want expired at the session's expiry %v, naming %s", last, r.ExpiresAt, ss.Ref)
	}
	_, err = e.s.RenewSession(e.ctx, ss.ID, "", 0)
	wantCode(t, "RenewSession(expired)", err, lease.CodeSessionLost)
	_, err = e.s.CloseSession(e.ctx, ss.ID, "")
	wantCode(t, "CloseSession(expired)", err, lease.CodeSessionLost)
	_, err = e.s.RenewSession(e.ctx, lease.NewSessionID(), "", 0)
	wantCode(t, "RenewSession(unknown)", err, lease.CodeNotFound)
}

// testSessionRestart: a restart that stretches the leases of a session (invariant 5) stretches
// the session alike, so they still expire together and the session can still be renewed.
func testSessionRestart(t *testing.T, e *env, databaseClock bool) {
	ss := e.openSession("proc-1", 10*time.Second)
	a := e.acquireIn(ss, "a")
	e.clock.Advance(8 * time.Second)
	e.restart() // at t0+8s: the lease and its session last until t0+18s
	e.clock.Advance(3 * time.Second)
	st, _ := e.s.Get(e.ctx, "a")
	r, err := e.s.RenewSession(e.ctx, ss.ID, "", 0)
	if databaseClock {
		if st.Held || !lease.IsCode(err, lease.CodeSessionLost) {
			t.Errorf("at t0+11s with the database's clock: a = %+v, RenewSession = %v; want both ended at t0+10s", st, err)
		}
		return
	}
	if !st.Held || st.Token != a.Token || err != nil || r.Leases != 1 {
		t.Errorf("3 s after a restart at t0+8s: a = %+v, RenewSession = %+v, %v; want a held and the session renewed with it", st, r, err)
	}
}

func (e *env) acquireSlot(name, holder string, limit int) (lease.Lease, error) {
	return e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: holder, TTL: 10 * time.Second, Limit: limit})
}

// testSemaphoreLimit: a semaphore of limit 3 has at most 3 holders, each with its own lease ID
// and growing token; its limit is fixed while anyone holds it; a freed slot is granted again;
// each slot expires on its own; the name's state sums its slots up.
func testSemaphoreLimit(t *testing.T, e *env) {
	var held []lease.Lease
	for i := range 3 {
		l, err := e.acquireSlot("pool", fmt.Sprintf("w%d", i), 3)
		if err != nil || l.Name != "pool" || l.Slot != i || l.Limit != 3 || i > 0 && (l.Token <= held[i-1].Token || l.ID == held[i-1].ID) {
			t.Fatalf("Acquire #%d (limit 3) = %+v, %v; want slot %d of pool with its own ID and a higher token", i, l, err, i)
		}
		held = append(held, l)
		e.clock.Advance(time.Second)
	}
	_, err := e.acquireSlot("pool", "w3", 3)
	wantCode(t, "Acquire #4 (limit 3)", err, lease.CodeHeld)
	for _, limit := range []int{2, 4, 0} {
		_, err := e.acquireSlot("pool", "w3", limit)
		wantCode(t, fmt.Sprintf("Acquire(limit %d) while held with 3", limit), err, lease.CodeLimitMismatch)
	}
	e.acquire("plain", "p", 10*time.Second)
	_, err = e.acquireSlot("plain", "w", 2)
	wantCode(t, "Acquire(limit 2) of a held plain lease", err, lease.CodeLimitMismatch)

	st, err := e.s.Get(e.ctx, "pool")
	if err != nil || st.Limit != 3 || len(st.Slots) != 3 || !st.Held || st.Token != held[2].Token {
		t.Fatalf("Get(pool) = %+v, %v; want a full semaphore of 3 slots", st, err)
	}
	if _, err := e.s.Renew(e.ctx, "pool", held[1].ID, 0, nil); err != nil {
		t.Errorf("Renew(slot 1) = %v", err)
	}
	if err := e.s.Release(e.ctx, "pool", held[1].ID); err != nil {
		t.Fatalf("Release(slot 1) = %v", err)
	}
	l, err := e.acquireSlot("pool", "w3", 3)
	if err != nil || l.Slot != 1 || l.Token <= held[2].Token {
		t.Fatalf("Acquire after slot 1 was released = %+v, %v; want slot 1 with a higher token", l, err)
	}
	// Slot 0 (granted at t0) expires on its own at t0+10s; slot 2 (t0+2s) holds on.
	e.clock.Advance(10*time.Second - 3*time.Second)
	w4, err := e.acquireSlot("pool", "w4", 3)
	if err != nil || w4.Slot != 0 {
		t.Fatalf("Acquire after slot 0 expired = %+v, %v; want slot 0", w4, err)
	}
	_, err = e.s.Renew(e.ctx, "pool", held[0].ID, 0, nil)
	wantCode(t, "Renew(expired slot 0)", err, lease.CodeLost)
	if err := e.s.Release(e.ctx, "other", held[2].ID); !lease.IsCode(err, lease.CodeLost) {
		t.Errorf("Release(slot of pool, under another name) = %v, want lease_lost", err)
	}
	// An admin revokes one slot by its token, then every slot.
	if err := e.s.Revoke(e.ctx, "pool", held[2].Token, "admin"); err != nil {
		t.Fatalf("Revoke(pool, token of slot 2) = %v", err)
	}
	_, err = e.s.Renew(e.ctx, "pool", held[2].ID, 0, nil)
	wantCode(t, "Renew(revoked slot 2)", err, lease.CodeLost)
	if _, err := e.s.Renew(e.ctx, "pool", l.ID, 0, nil); err != nil {
		t.Errorf("Renew(slot 1) after slot 2 was revoked = %v", err)
	}
	err = e.s.Revoke(e.ctx, "pool", held[2].Token, "admin")
	wantCode(t, "Revoke(pool, a revoked slot's token)", err, lease.CodeLost)
	if err := e.s.Revoke(e.ctx, "pool", 0, "admin"); err != nil {
		t.Fatalf("Revoke(pool) = %v", err)
	}
	if st, err := e.s.Get(e.ctx, "pool"); err != nil || st.Token == 0 || slices.ContainsFunc(st.Slots, func(s lease.State) bool { return s.Held }) {
		t.Errorf("Get(pool) after revoking it = %+v, %v; want no slot held", st, err)
	}
}

// testSemaphoreConcurrent: many acquire a semaphore of limit 3 at once; exactly 3 win
// (invariant M1: never more than N unexpired holders).
func testSemaphoreConcurrent(t *testing.T, e *env) {
	const n, limit = 12, 3
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[int]int64{}
	for i := range n {
		wg.Go(func() {
			l, err := e.acquireSlot("pool", fmt.Sprintf("w%d", i), limit)
			if err != nil && !lease.IsCode(err, lease.CodeHeld) {
				t.Errorf("Acquire(w%d) = %v", i, err)
			}
			if err == nil {
				mu.Lock()
				if _, dup := won[l.Slot]; dup {
					t.Errorf("slot %d granted twice", l.Slot)
				}
				won[l.Slot] = l.Token
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(won) != limit {
		t.Errorf("%d holders won, want %d", len(won), limit)
	}
	if st, err := e.s.Get(e.ctx, "pool"); err != nil || !st.Held || len(st.Slots) != limit {
		t.Errorf("Get(pool) = %+v, %v; want %d slots, full", st, err, limit)
	}
}

// testSessionOwner: only the key that opened a session acquires under it, renews it or closes
// it (an admin, by "", may renew or close any): its leases may lie outside another key's
// prefixes.
func testSessionOwner(t *testing.T, e *env) {
	ss, err := e.s.OpenSession(e.ctx, store.SessionParams{Holder: "p", TTL: 10 * time.Second, Owner: "key_a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "a", Holder: "p", SessionID: ss.ID, Owner: "key_a"}); err != nil {
		t.Fatalf("Acquire by the session's key = %v", err)
	}
	_, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: "b", Holder: "p", SessionID: ss.ID, Owner: "key_b"})
	wantCode(t, "Acquire under another key's session", err, lease.CodeForbidden)
	_, err = e.s.RenewSession(e.ctx, ss.ID, "key_b", 0)
	wantCode(t, "RenewSession by another key", err, lease.CodeForbidden)
	_, err = e.s.CloseSession(e.ctx, ss.ID, "key_b")
	wantCode(t, "CloseSession by another key", err, lease.CodeForbidden)
	if st, _ := e.s.Get(e.ctx, "a"); !st.Held {
		t.Errorf("a after another key's close = %+v, want held", st)
	}
	if _, err := e.s.RenewSession(e.ctx, ss.ID, "key_a", 0); err != nil {
		t.Errorf("RenewSession by its key = %v", err)
	}
	if c, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil || c.Leases != 1 {
		t.Errorf("CloseSession by an admin = %+v, %v; want its lease released", c, err)
	}
}

// testResourceWriters: a resource keeps its last store.WritersKept accepted writes, newest
// first, with who wrote them; a refused write is not among them, nor is a write whose
// condition failed; deleting the resource forgets them.
func testResourceWriters(t *testing.T, e *env) {
	_, err := e.s.ResourceWriters(e.ctx, "db")
	wantCode(t, "ResourceWriters(never written)", err, lease.CodeNotFound)
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Minute)
	if _, err := e.put("db", a.Token, "", "first"); err != nil {
		t.Fatal(err)
	}
	var want []lease.Write
	for i := range store.WritersKept + 2 {
		e.clock.Advance(time.Second)
		value := strings.Repeat("x", i+1)
		r, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "db", Token: b.Token, LeaseName: "job",
			Value: []byte(value), ContentType: fmt.Sprintf("text/v%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]lease.Write{{Version: r.Version, Token: b.Token, Lease: "job", Holder: "w2", At: e.clock.Now(),
			Size: int64(len(value)), ContentType: fmt.Sprintf("text/v%d", i)}}, want...)
	}
	if _, err := e.put("db", a.Token, "", "stale"); !lease.IsCode(err, lease.CodeStale) {
		t.Fatalf("PutResource(stale) = %v, want stale_token", err)
	}
	if _, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "db", Token: b.Token, IfVersion: 1}); !lease.IsCode(err, lease.CodePreconditionFailed) {
		t.Fatalf("PutResource(IfVersion 1) = %v, want precondition_failed", err)
	}
	got, err := e.s.ResourceWriters(e.ctx, "db")
	if err != nil {
		t.Fatalf("ResourceWriters() = %v", err)
	}
	if diff := cmp.Diff(want[:store.WritersKept], got); diff != "" {
		t.Errorf("writers, newest first, the last %d only (-want +got):\n%s", store.WritersKept, diff)
	}
	if err := e.s.DeleteResource(e.ctx, "db", "ops"); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.ResourceWriters(e.ctx, "db")
	wantCode(t, "ResourceWriters(deleted)", err, lease.CodeNotFound)
	// Written again, it starts a new history: nothing of the deleted one comes back.
	if _, err := e.put("db", a.Token, "", "again"); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.ResourceWriters(e.ctx, "db")
	if err != nil || len(got) != 1 || got[0].Version != 1 || got[0].Token != a.Token || got[0].Holder != "w1" || got[0].Lease != "job" {
		t.Errorf("ResourceWriters(written again) = %+v, %v; want the one new write of w1, put down to its token's lease", got, err)
	}
	// A first write refused leaves no resource and no history behind.
	if _, err := e.put("fresh", a.Token, "job", "refused"); !lease.IsCode(err, lease.CodeStale) {
		t.Fatalf("PutResource(fresh, token not the lease's) = %v, want stale_token", err)
	}
	_, err = e.s.ResourceWriters(e.ctx, "fresh")
	wantCode(t, "ResourceWriters(only refused)", err, lease.CodeNotFound)
}

// testScopedTokens: a write or a rejection report by a caller limited to "billing-" never puts
// a token down to a lease outside that scope (invariant 8): it reads as a token that named no
// lease, with no holder and no rejected event on that lease; an unlimited caller's is put down
// to the token's lease, and a holder only ever to its own lease.
func testScopedTokens(t *testing.T, e *env) {
	scope := lease.Scope{"billing-"}
	own := e.acquire("billing-a", "bob@billing", time.Hour)
	e.clock.Advance(time.Second)
	hr := e.acquire("hr-payroll-lock", "alice@hr-host-7", time.Hour)
	e.clock.Advance(time.Second) // the clock is past every token: each of them passes the scoped bound
	put := func(res string, token int64, leaseName string, scope lease.Scope) (lease.Resource, error) {
		return e.s.PutResource(e.ctx, store.ResourceWrite{Name: res, Token: token, LeaseName: leaseName, Value: []byte("v"), Scope: scope})
	}
	hidden := func(what, leaseName, holder string) {
		t.Helper()
		if leaseName != "" || holder != "" {
			t.Errorf("%s = lease %q, holder %q; want neither: the token's lease is outside the scope", what, leaseName, holder)
		}
	}

	r, err := put("billing-r2", hr.Token, "", scope)
	if err != nil {
		t.Fatalf("PutResource(billing-r2, scoped, an out-of-scope token) = %v, want it to apply as a token that named no lease", err)
	}
	hidden("PutResource(billing-r2, scoped)", r.Lease, r.Holder)
	ws, err := e.s.ResourceWriters(e.ctx, "billing-r2")
	if err != nil || len(ws) != 1 {
		t.Fatalf("ResourceWriters(billing-r2) = %+v, %v", ws, err)
	}
	hidden("ResourceWriters(billing-r2)[0]", ws[0].Lease, ws[0].Holder)
	if r, err := put("billing-r3", hr.Token, "", nil); err != nil || r.Lease != "hr-payroll-lock" || r.Holder != "alice@hr-host-7" {
		t.Errorf("PutResource(billing-r3, unscoped) = %+v, %v; want it put down to hr-payroll-lock and alice", r, err)
	}
	if r, err := put("billing-r4", own.Token, "", scope); err != nil || r.Lease != "billing-a" || r.Holder != "bob@billing" {
		t.Errorf("PutResource(billing-r4, scoped, its own token) = %+v, %v; want it put down to billing-a and bob", r, err)
	}

	// Stale writes: billing-r3's fence is hr's token, above own's.
	if _, err := put("billing-r3", own.Token, "", scope); !lease.IsCode(err, lease.CodeStale) {
		t.Fatalf("PutResource(billing-r3, scoped, stale) = %v, want stale_token", err)
	}
	e.clock.Advance(time.Second)
	hr2 := e.acquire("hr-other", "carol@hr", time.Hour)
	e.clock.Advance(time.Second)
	if _, err := put("billing-r5", hr2.Token, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := put("billing-r5", hr.Token, "", scope); !lease.IsCode(err, lease.CodeStale) {
		t.Fatalf("PutResource(billing-r5, scoped, an out-of-scope stale token) = %v, want stale_token", err)
	}
	// With a Lease-Name in scope and another lease's token: the holder is not put down to it.
	for _, sc := range []lease.Scope{scope, nil} {
		if _, err := put("billing-r6", hr.Token, "billing-a", sc); !lease.IsCode(err, lease.CodeStale) {
			t.Fatalf("PutResource(billing-r6, Lease-Name billing-a, hr's token, scope %v) = %v, want stale_token", sc, err)
		}
	}
	rej, err := e.s.Rejections(e.ctx, store.RejectionFilter{Since: t0, Limit: store.MaxLimit})
	if err != nil || len(rej.Items) != 4 {
		t.Fatalf("Rejections() = %+v, %v; want 4", rej.Items, err)
	}
	byRes := map[string][]lease.Rejection{}
	for _, x := range rej.Items {
		byRes[x.Resource] = append(byRes[x.Resource], x)
	}
	if x := byRes["billing-r3"]; len(x) != 1 || x[0].Lease != "billing-a" || x[0].Holder != "bob@billing" {
		t.Errorf("rejection of billing-r3 (own token) = %+v, want it put down to billing-a and bob", x)
	}
	hidden("rejection of billing-r5 (hr's token, scoped)", byRes["billing-r5"][0].Lease, byRes["billing-r5"][0].Holder)
	for _, x := range byRes["billing-r6"] {
		if x.Lease != "billing-a" || x.Holder != "" {
			t.Errorf("rejection of billing-r6 = lease %q holder %q; want billing-a and no holder (the token is another lease's)", x.Lease, x.Holder)
		}
	}

	// A report of a rejection made outside, with hr's token.
	x, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "billing-ext", PresentedToken: hr.Token, CurrentFence: hr.Token + 1,
		Source: lease.RejectionSourceExternal}, scope)
	if err != nil {
		t.Fatal(err)
	}
	hidden("RecordRejection(scoped, hr's token)", x.Lease, x.Holder)
	if x, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "billing-ext", PresentedToken: hr.Token, CurrentFence: hr.Token + 1,
		Source: lease.RejectionSourceExternal}, nil); err != nil || x.Lease != "hr-payroll-lock" || x.Holder != "alice@hr-host-7" {
		t.Errorf("RecordRejection(unscoped, hr's token) = %+v, %v; want it put down to hr-payroll-lock and alice", x, err)
	}
	// hr-payroll-lock's history has its grant and the one unscoped report, nothing scoped.
	var rejected int
	for _, ev := range e.events("hr-payroll-lock") {
		if ev.Type == lease.EventRejected {
			rejected++
		}
	}
	if rejected != 1 {
		t.Errorf("rejected events of hr-payroll-lock = %d, want 1 (the unscoped report's)", rejected)
	}
	all, err := e.s.Events(e.ctx, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range all.Items {
		if ev.Type == lease.EventRejected && ev.Name == "" && ev.Holder != "" {
			t.Errorf("rejected event %+v has a holder and no lease", ev)
		}
	}
}

// testScopedNotIssued: which tokens a caller limited to "billing-" is told were never issued
// depends only on its scope and the clock, never on tokens issued outside it, so it cannot find
// the newest token by bisection; an issued token in its scope still writes, a made-up one above
// the clock is still refused, and the refusal names no bound.
func testScopedNotIssued(t *testing.T, e *env) {
	scope := lease.Scope{"billing-"}
	// The clock stands still: the grants' tokens run ahead of it, one by one.
	own := e.acquire("billing-a", "bob", time.Hour)
	hr := e.acquire("hr-a", "alice", time.Hour)
	hr2 := e.acquire("hr-b", "carol", time.Hour)
	if hr.Token != own.Token+1 || hr2.Token != hr.Token+1 {
		t.Fatalf("tokens %d, %d, %d; want consecutive (the clock stands still)", own.Token, hr.Token, hr2.Token)
	}
	put := func(token int64, sc lease.Scope) error {
		_, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "billing-probe", Token: token, IfVersion: 99, Scope: sc})
		return err
	}
	if err := put(own.Token, scope); !lease.IsCode(err, lease.CodePreconditionFailed) {
		t.Errorf("PutResource(own token, scoped) = %v, want precondition_failed (the token passes)", err)
	}
	last := strconv.FormatInt(hr2.Token, 10)
	for _, tok := range []int64{hr.Token, hr2.Token, hr2.Token + 1, lease.MaxToken} {
		err := put(tok, scope)
		wantCode(t, fmt.Sprintf("PutResource(token %d, scoped)", tok), err, lease.CodeNotIssued)
		if strings.Contains(err.Error(), last) && tok != hr2.Token {
			t.Errorf("PutResource(token %d, scoped) = %v; it names the newest token %s", tok, err, last)
		}
	}
	// Unscoped, the boundary is the newest token, as before.
	if err := put(hr2.Token, nil); !lease.IsCode(err, lease.CodePreconditionFailed) {
		t.Errorf("PutResource(newest token, unscoped) = %v, want precondition_failed", err)
	}
	if err := put(hr2.Token+1, nil); !lease.IsCode(err, lease.CodeNotIssued) {
		t.Errorf("PutResource(newest token + 1, unscoped) = %v, want token_not_issued", err)
	}
	// A grant in scope above them moves the scoped bound; the clock moving past them does too.
	own2 := e.acquire("billing-b", "bob", time.Hour)
	if err := put(hr2.Token, scope); !lease.IsCode(err, lease.CodePreconditionFailed) {
		t.Errorf("PutResource(hr-b's token, scoped, below billing-b's %d) = %v, want precondition_failed", own2.Token, err)
	}
	e.clock.Advance(time.Second)
	if err := put(own2.Token+1, scope); !lease.IsCode(err, lease.CodePreconditionFailed) {
		t.Errorf("PutResource(a token below the clock, scoped) = %v, want precondition_failed", err)
	}
}

// testResourceQuota: a key's resources (those it wrote last) stay within its quota, by count
// and by bytes in all; a write past it is quota_exceeded and changes nothing, records nothing;
// a resource written by another key, or deleted, counts no more.
func testResourceQuota(t *testing.T, e *env) {
	l := e.acquire("job", "w", time.Hour)
	q := lease.Quota{Resources: 2, Bytes: 10}
	put := func(owner, name string, size int, q lease.Quota) error {
		_, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: name, Token: l.Token, Value: []byte(strings.Repeat("v", size)), Owner: owner, Quota: q})
		return err
	}
	for _, w := range []struct {
		owner, name string
		size        int
		quota       lease.Quota
		ok          bool
	}{
		{"key_a", "r1", 5, q, true},
		{"key_a", "r2", 4, q, true},
		{"key_a", "r3", 1, q, false},                // a third resource
		{"key_a", "r1", 6, q, true},                 // 6 + 4 = 10 bytes
		{"key_a", "r1", 7, q, false},                // 11 bytes
		{"key_b", "r3", 1, q, true},                 // another key's quota
		{"key_b", "r2", 1, q, true},                 // r2 is key_b's now
		{"key_a", "r4", 4, q, true},                 // key_a has r1 alone
		{"key_admin", "r5", 0, lease.Quota{}, true}, // no quota (an admin)
	} {
		err := put(w.owner, w.name, w.size, w.quota)
		if w.ok && err != nil {
			t.Fatalf("PutResource(%s, %d bytes, by %s) = %v, want it written", w.name, w.size, w.owner, err)
		}
		if !w.ok {
			wantCode(t, fmt.Sprintf("PutResource(%s, %d bytes, by %s)", w.name, w.size, w.owner), err, lease.CodeQuotaExceeded)
		}
	}
	if r, err := e.s.GetResource(e.ctx, "r1"); err != nil || len(r.Value) != 6 || r.Version != 2 {
		t.Errorf("GetResource(r1) = %d bytes at version %d, %v; want the 6 bytes of version 2 (the write past the quota changed nothing)", len(r.Value), r.Version, err)
	}
	if p, err := e.s.Rejections(e.ctx, store.RejectionFilter{Since: t0}); err != nil || len(p.Items) != 0 {
		t.Errorf("Rejections() = %+v, %v; want none: a write past its quota is no rejection", p.Items, err)
	}
	if err := e.s.DeleteResource(e.ctx, "r4", "ops"); err != nil {
		t.Fatal(err)
	}
	if err := put("key_a", "r6", 4, q); err != nil {
		t.Errorf("PutResource(r6) after r4 was deleted = %v, want it written", err)
	}
}
