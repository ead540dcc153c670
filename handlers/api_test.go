package handlers_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

func TestAcquireLease(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		e := newEnv(t)
		md := api.Metadata{"addr": "10.0.0.7:9000"}
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", nil, api.AcquireRequest{Holder: "w1", TtlMs: 15000, Metadata: &md})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("AcquireLease() = %v, %v; want 200", status(r), err)
		}
		l := *r.JSON200
		if r.Headers200.FencingToken != l.Token || r.HTTPResponse.Header.Get("Fencing-Token") != strconv.FormatInt(l.Token, 10) {
			t.Errorf("Fencing-Token header = %q, want the body's token %d", r.HTTPResponse.Header.Get("Fencing-Token"), l.Token)
		}
		if l.LeaseId == nil || !strings.HasPrefix(*l.LeaseId, lease.IDPrefix) {
			t.Fatalf("lease_id = %v, want a %s… secret", l.LeaseId, lease.IDPrefix)
		}
		want := api.Lease{Name: "job", Holder: "w1", LeaseId: l.LeaseId, Token: t0.UnixMicro(), TtlMs: 15000,
			AcquiredAt: wiretime.From(t0), RenewedAt: wiretime.From(t0), ExpiresAt: wiretime.From(t0.Add(15 * time.Second)), Metadata: &md,
			ServerEpoch: l.ServerEpoch, Mode: ptr(api.LeaseModeExclusive)}
		if diff := cmp.Diff(want, l); diff != "" {
			t.Errorf("AcquireLease() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("ErrHeld", func(t *testing.T) {
		e := newEnv(t)
		first := e.acquire("job", "w1", 10*time.Second)
		e.clock.Advance(2500 * time.Millisecond)
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", nil, api.AcquireRequest{Holder: "w2", TtlMs: 10000})
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, "AcquireLease(held)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseHeld)
		if r.Headers409 == nil || r.Headers409.RetryAfter == nil || *r.Headers409.RetryAfter != 8 {
			t.Errorf("Retry-After = %q, want 8 (7.5 s rounded up)", r.HTTPResponse.Header.Get("Retry-After"))
		}
		if p.Holder == nil || *p.Holder != "w1" || p.ExpiresAt == nil || !p.ExpiresAt.Equal(first.ExpiresAt.Time) {
			t.Errorf("problem holder %v expires_at %v, want w1 and %v", p.Holder, p.ExpiresAt, first.ExpiresAt)
		}
		if st := e.state("job"); st.Holder != "w1" || st.Token != first.Token {
			t.Errorf("state after a refused acquire = %+v, want w1's lease untouched", st)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		e := newEnv(t)
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", nil, api.AcquireRequest{Holder: "w1", TtlMs: 5})
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, "AcquireLease(ttl 5 ms)", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		if r.ApplicationproblemJSON400 == nil || p.Errors == nil || !strings.Contains(strings.Join(*p.Errors, ";"), "ttl_ms") {
			t.Errorf("problem = %+v, want a field error naming ttl_ms", p)
		}
	})
	t.Run("AfterExpiry", func(t *testing.T) {
		e := newEnv(t)
		a := e.acquire("job", "w1", time.Second)
		e.clock.Advance(time.Second)
		b := e.acquire("job", "w2", time.Second)
		if b.Token <= a.Token {
			t.Errorf("token after expiry %d, want > %d", b.Token, a.Token)
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	body := api.AcquireRequest{Holder: "w1", TtlMs: 10000}
	key := &api.AcquireLeaseParams{IdempotencyKey: ptr("retry-1-0123456789abcdef")}
	first, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", key, body)
	if err != nil || first.JSON200 == nil {
		t.Fatalf("AcquireLease(key) = %v, %v", status(first), err)
	}
	t.Run("OKRetry", func(t *testing.T) {
		e.clock.Advance(time.Second)
		again, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", key, body)
		if err != nil || again.JSON200 == nil {
			t.Fatalf("AcquireLease(retry) = %v, %v; want the first answer", status(again), err)
		}
		if diff := cmp.Diff(first.JSON200, again.JSON200); diff != "" {
			t.Errorf("retry answer differs (-first +retry):\n%s", diff)
		}
		if again.Headers200.FencingToken != first.JSON200.Token {
			t.Errorf("retry Fencing-Token = %d, want %d", again.Headers200.FencingToken, first.JSON200.Token)
		}
	})
	t.Run("ErrInvalidOtherRequest", func(t *testing.T) {
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", key, api.AcquireRequest{Holder: "w2", TtlMs: 10000})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "AcquireLease(key reused)", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	})
	t.Run("ErrHeldWithoutKey", func(t *testing.T) {
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", nil, body)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "AcquireLease(no key)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseHeld)
	})
	t.Run("ErrLostAfterRelease", func(t *testing.T) {
		rel, err := e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: *first.JSON200.LeaseId})
		if err != nil || rel.StatusCode() != http.StatusNoContent {
			t.Fatalf("ReleaseLease(replayed id) = %v, %v", status(rel), err)
		}
		r, err := e.c.AcquireLeaseWithResponse(e.ctx, "job", key, body)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "AcquireLease(retry after release)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if ra := r.HTTPResponse.Header.Get("Retry-After"); ra != "" {
			t.Errorf("lease_lost has Retry-After %q: waiting does not help, the spec says none", ra)
		}
	})
	if got := len(e.events("job")); got != 2 {
		t.Errorf("events = %d, want 2 (one grant, one release): retries must not grant again", got)
	}
}

func TestRenewLease(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		e := newEnv(t)
		l := e.acquire("job", "w1", 10*time.Second)
		e.clock.Advance(9 * time.Second)
		r, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("RenewLease() = %v, %v", status(r), err)
		}
		if r.JSON200.Token != l.Token || r.Headers200.FencingToken != l.Token || !r.JSON200.ExpiresAt.Equal(t0.Add(19*time.Second)) || r.JSON200.LeaseId != nil {
			t.Errorf("RenewLease() = %+v (header token %d), want token %d until %v and no lease_id", r.JSON200, r.Headers200.FencingToken, l.Token, t0.Add(19*time.Second))
		}
		r, err = e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId, TtlMs: ptr(int64(60000))})
		if err != nil || r.JSON200 == nil || r.JSON200.TtlMs != 60000 || !r.JSON200.ExpiresAt.Equal(t0.Add(69*time.Second)) {
			t.Errorf("RenewLease(ttl 60 s) = %v, %v", status(r), err)
		}
	})
	for _, tt := range []struct {
		name  string
		setup func(e *env, l api.Lease) string // returns the lease_id to renew with
	}{
		{"ErrLost/Expired", func(e *env, l api.Lease) string { e.clock.Advance(10 * time.Second); return *l.LeaseId }},
		{"ErrLost/UnknownID", func(e *env, l api.Lease) string { return "lk_nope" }},
		{"ErrLost/Released", func(e *env, l api.Lease) string {
			e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: *l.LeaseId})
			return *l.LeaseId
		}},
		{"ErrLost/Revoked", func(e *env, l api.Lease) string { e.c.RevokeLeaseWithResponse(e.ctx, "job", nil); return *l.LeaseId }},
		{"ErrLost/Superseded", func(e *env, l api.Lease) string {
			e.clock.Advance(10 * time.Second)
			e.acquire("job", "w2", 10*time.Second)
			return *l.LeaseId
		}},
		{"ErrLost/OtherNamesID", func(e *env, l api.Lease) string { return *e.acquire("other", "w2", time.Minute).LeaseId }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			l := e.acquire("job", "w1", 10*time.Second)
			id := tt.setup(e, l)
			before := e.state("job")
			r, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: id})
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, "RenewLease()", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
			if diff := cmp.Diff(before, e.state("job")); diff != "" {
				t.Errorf("a refused renew changed the lease (-before +after):\n%s", diff)
			}
		})
	}
	t.Run("ErrInvalidTTL", func(t *testing.T) {
		e := newEnv(t)
		l := e.acquire("job", "w1", 10*time.Second)
		for _, ttl := range []int64{-1, 0, 999, 3600001, 1 << 62} {
			r, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId, TtlMs: &ttl})
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, "RenewLease(ttl "+strconv.FormatInt(ttl, 10)+")", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		}
	})
}

func TestReleaseLease(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		e := newEnv(t)
		l := e.acquire("job", "w1", 10*time.Second)
		e.clock.Advance(time.Second)
		for i := range 2 {
			r, err := e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: *l.LeaseId})
			if err != nil || r.StatusCode() != http.StatusNoContent || len(r.Body) != 0 {
				t.Fatalf("ReleaseLease() #%d = %v %q, %v; want 204", i+1, status(r), r.Body, err)
			}
		}
		st := e.state("job")
		if st.Held || st.End == nil || *st.End != api.LeaseStateEndReleased || !st.EndedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("state after release = %+v, want free, released at %v", st, t0.Add(time.Second))
		}
	})
	t.Run("ErrLostAfterExpiry", func(t *testing.T) {
		e := newEnv(t)
		l := e.acquire("job", "w1", 10*time.Second)
		e.clock.Advance(11 * time.Second)
		r, err := e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: *l.LeaseId})
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, "ReleaseLease(expired)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if p.Detail == nil || !strings.Contains(*p.Detail, "expired") {
			t.Errorf("detail = %v, want it to say the lease expired", p.Detail)
		}
	})
	t.Run("ErrLostWrongID", func(t *testing.T) {
		e := newEnv(t)
		e.acquire("job", "w1", 10*time.Second)
		r, err := e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: lease.NewID(1)})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "ReleaseLease(wrong id)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if st := e.state("job"); !st.Held {
			t.Errorf("state after a foreign release = %+v, want still held", st)
		}
	})
}

func TestGetLease(t *testing.T) {
	e := newEnv(t)
	t.Run("ErrNotFound", func(t *testing.T) {
		r, err := e.c.GetLeaseWithResponse(e.ctx, "never")
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "GetLease(never used)", r.HTTPResponse, r.Body, http.StatusNotFound, api.ProblemCodeNotFound)
	})
	l := e.acquire("job", "w1", 10*time.Second)
	t.Run("OKHeld", func(t *testing.T) {
		r, err := e.c.GetLeaseWithResponse(e.ctx, "job")
		if err != nil || r.JSON200 == nil {
			t.Fatalf("GetLease() = %v, %v", status(r), err)
		}
		if bytes.Contains(r.Body, []byte("lease_id")) || bytes.Contains(r.Body, []byte(*l.LeaseId)) {
			t.Errorf("GetLease() body %s shows the lease_id", r.Body)
		}
		at, exp := wiretime.From(t0), wiretime.From(t0.Add(10*time.Second))
		want := api.LeaseState{Name: "job", Held: true, Holder: "w1", Token: l.Token, TtlMs: 10000,
			AcquiredAt: &at, RenewedAt: &at, ExpiresAt: &exp, AvailableAt: &exp, Mode: ptr(api.LeaseStateModeExclusive)}
		if diff := cmp.Diff(want, *r.JSON200); diff != "" {
			t.Errorf("GetLease() mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("OKFreeKeepsLastHolder", func(t *testing.T) {
		e.clock.Advance(time.Minute)
		st := e.state("job")
		if st.Held || st.Holder != "w1" || st.Token != l.Token || st.End == nil || *st.End != api.LeaseStateEndExpired {
			t.Errorf("GetLease(expired) = %+v, want held false with holder w1, token %d, end expired", st, l.Token)
		}
	})
}

func TestListLeases(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a-1", "a-2", "a-3", "a-4", "b-1"} {
		e.acquire(n, "w-"+n, 10*time.Second)
	}
	if r, err := e.c.RevokeLeaseWithResponse(e.ctx, "a-2", nil); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("RevokeLease(a-2) = %v, %v", status(r), err)
	}
	list := func(t *testing.T, p api.ListLeasesParams) []string {
		t.Helper()
		var names []string
		for range 10 {
			r, err := e.c.ListLeasesWithResponse(e.ctx, &p)
			if err != nil || r.JSON200 == nil {
				t.Fatalf("ListLeases(%+v) = %v, %v", p, status(r), err)
			}
			for _, st := range r.JSON200.Leases {
				names = append(names, st.Name)
			}
			if r.JSON200.NextCursor == "" {
				return names
			}
			p.Cursor = ptr(r.JSON200.NextCursor)
		}
		t.Fatalf("ListLeases(%+v): cursors never end", p)
		return nil
	}
	tests := []struct {
		name string
		p    api.ListLeasesParams
		want []string
	}{
		{"OKAll", api.ListLeasesParams{}, []string{"a-1", "a-2", "a-3", "a-4", "b-1"}},
		{"OKPrefixPaged", api.ListLeasesParams{Prefix: ptr("a-"), Limit: ptr(2)}, []string{"a-1", "a-2", "a-3", "a-4"}},
		{"OKHeld", api.ListLeasesParams{State: ptr(api.Held)}, []string{"a-1", "a-3", "a-4", "b-1"}},
		{"OKFree", api.ListLeasesParams{State: ptr(api.Free)}, []string{"a-2"}},
		{"OKHeldPrefixPagedBy1", api.ListLeasesParams{Prefix: ptr("a"), State: ptr(api.Held), Limit: ptr(1)}, []string{"a-1", "a-3", "a-4"}},
		{"OKNoMatch", api.ListLeasesParams{Prefix: ptr("zzz")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := list(t, tt.p); !cmp.Equal(got, tt.want) {
				t.Errorf("ListLeases(%+v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	t.Run("OnePageHasCursor", func(t *testing.T) {
		r, err := e.c.ListLeasesWithResponse(e.ctx, &api.ListLeasesParams{Limit: ptr(2)})
		if err != nil || r.JSON200 == nil || len(r.JSON200.Leases) != 2 || r.JSON200.NextCursor == "" {
			t.Errorf("ListLeases(limit 2) = %v %s, %v; want 2 leases and a cursor", status(r), r.Body, err)
		}
	})
	t.Run("ErrInvalidCursor", func(t *testing.T) {
		r, err := e.c.ListLeasesWithResponse(e.ctx, &api.ListLeasesParams{Cursor: ptr("!!")})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "ListLeases(bad cursor)", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	})
	t.Run("ErrInvalidLimit", func(t *testing.T) {
		r, err := e.c.ListLeasesWithResponse(e.ctx, &api.ListLeasesParams{Limit: ptr(1001)})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "ListLeases(limit 1001)", r.HTTPResponse, r.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	})
}

func TestListLeaseEvents(t *testing.T) {
	e := newEnv(t)
	l := e.acquire("job", "w1", 10*time.Second)
	e.clock.Advance(time.Second)
	e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId})
	e.clock.Advance(time.Second)
	e.c.ReleaseLeaseWithResponse(e.ctx, "job", api.ReleaseRequest{LeaseId: *l.LeaseId})
	e.clock.Advance(time.Second)
	m := e.acquire("job", "w2", time.Second)
	e.clock.Advance(5 * time.Second)
	if _, _, err := e.store.ExpireDue(e.ctx); err != nil {
		t.Fatal(err)
	}

	type ev struct {
		Type  api.EventType
		Token int64
		At    time.Time
	}
	want := []ev{
		{api.EventTypeAcquired, l.Token, t0},
		{api.EventTypeRenewed, l.Token, t0.Add(time.Second)},
		{api.EventTypeReleased, l.Token, t0.Add(2 * time.Second)},
		{api.EventTypeAcquired, m.Token, t0.Add(3 * time.Second)},
		{api.EventTypeExpired, m.Token, t0.Add(4 * time.Second)}, // at the expiry, not when it was noticed
	}
	t.Run("OKOldestFirst", func(t *testing.T) {
		var got []ev
		for _, x := range e.events("job") {
			got = append(got, ev{x.Type, x.Token, x.At.Time})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("OKPaged", func(t *testing.T) {
		var seqs []int64
		p := &api.ListLeaseEventsParams{Limit: ptr(2)}
		for range 10 {
			r, err := e.c.ListLeaseEventsWithResponse(e.ctx, "job", p)
			if err != nil || r.JSON200 == nil || len(r.JSON200.Events) > 2 {
				t.Fatalf("ListLeaseEvents(limit 2) = %v, %v", status(r), err)
			}
			for _, x := range r.JSON200.Events {
				seqs = append(seqs, x.Seq)
			}
			if r.JSON200.NextCursor == "" {
				break
			}
			p.Cursor = ptr(r.JSON200.NextCursor)
		}
		if len(seqs) != len(want) {
			t.Fatalf("paged seqs = %v, want %d", seqs, len(want))
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("seqs = %v, want increasing", seqs)
			}
		}
	})
	t.Run("OKNeverUsedIsEmpty", func(t *testing.T) {
		if got := e.events("never"); len(got) != 0 {
			t.Errorf("events(never) = %v, want none", got)
		}
	})
}

func TestRevokeLease(t *testing.T) {
	e := newEnv(t)
	t.Run("ErrNotFound", func(t *testing.T) {
		r, err := e.c.RevokeLeaseWithResponse(e.ctx, "never", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "RevokeLease(never used)", r.HTTPResponse, r.Body, http.StatusNotFound, api.ProblemCodeNotFound)
	})
	t.Run("ErrLostByOtherToken", func(t *testing.T) {
		l := e.acquire("by-token", "w1", time.Minute)
		other := l.Token - 1
		r, err := e.c.RevokeLeaseWithResponse(e.ctx, "by-token", &api.RevokeLeaseParams{Token: &other})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "RevokeLease(token of another grant)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if st := e.state("by-token"); !st.Held {
			t.Errorf("state after a revoke aimed at another grant = %+v, want still held", st)
		}
		r, err = e.c.RevokeLeaseWithResponse(e.ctx, "by-token", &api.RevokeLeaseParams{Token: &l.Token})
		if err != nil || r.StatusCode() != http.StatusNoContent {
			t.Fatalf("RevokeLease(its own token) = %v, %v; want 204", status(r), err)
		}
	})
	t.Run("OK", func(t *testing.T) {
		l := e.acquire("job", "w1", time.Minute)
		for i := range 2 { // the second finds the name free: still 204
			r, err := e.c.RevokeLeaseWithResponse(e.ctx, "job", nil)
			if err != nil || r.StatusCode() != http.StatusNoContent {
				t.Fatalf("RevokeLease() #%d = %v, %v; want 204", i+1, status(r), err)
			}
		}
		rr, err := e.c.RenewLeaseWithResponse(e.ctx, "job", api.RenewRequest{LeaseId: *l.LeaseId})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "RenewLease(revoked)", rr.HTTPResponse, rr.Body, http.StatusConflict, api.ProblemCodeLeaseLost)
		if st := e.state("job"); st.Held || st.End == nil || *st.End != api.LeaseStateEndRevoked {
			t.Errorf("state after revoke = %+v", st)
		}
	})
}

func TestResources(t *testing.T) {
	e := newEnv(t)
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(time.Second)
	b := e.acquire("job", "w2", time.Minute)
	put := func(token int64, leaseName *string, value string) *api.PutResourceResponse {
		t.Helper()
		r, err := e.c.PutResourceWithBodyWithResponse(e.ctx, "orders", &api.PutResourceParams{FencingToken: &token, LeaseName: leaseName},
			"text/plain; charset=utf-8", strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("OK", func(t *testing.T) {
		r := put(b.Token, ptr("job"), "v1")
		if r.JSON201 == nil || r.JSON200 != nil || r.HTTPResponse.Header.Get("Location") != "/v1/resources/orders" {
			t.Fatalf("PutResource() = %v %s, want 201 with Location (the write created it)", status(r), r.Body)
		}
		r.JSON200 = r.JSON201
		want := api.ResourceInfo{Resource: "orders", Fence: b.Token, Version: 1, UpdatedAt: wiretime.From(t0.Add(time.Second)), Size: 2,
			ContentType: "text/plain; charset=utf-8", Lease: ptr("job"), Holder: ptr("w2")}
		if diff := cmp.Diff(want, *r.JSON200); diff != "" {
			t.Errorf("PutResource() mismatch (-want +got):\n%s", diff)
		}
		if r.HTTPResponse.Header.Get("ETag") != `"1"` {
			t.Errorf("ETag = %q, want \"1\"", r.HTTPResponse.Header.Get("ETag"))
		}
	})
	t.Run("ErrStale", func(t *testing.T) {
		r := put(a.Token, nil, "stale")
		p := wantProblem(t, "PutResource(stale)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeStaleToken)
		if p.PresentedToken == nil || *p.PresentedToken != a.Token || p.CurrentFence == nil || *p.CurrentFence != b.Token {
			t.Errorf("problem tokens = %v / %v, want %d / %d", p.PresentedToken, p.CurrentFence, a.Token, b.Token)
		}
	})
	t.Run("ErrStaleNotTheLeasesToken", func(t *testing.T) {
		other := e.acquire("other", "w3", time.Minute)
		r := put(other.Token, ptr("job"), "not the lease's token")
		wantProblem(t, "PutResource(token not the lease's)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeStaleToken)
	})
	t.Run("GetOK", func(t *testing.T) {
		r, err := e.c.GetResourceWithResponse(e.ctx, "orders")
		if err != nil || r.StatusCode() != http.StatusOK {
			t.Fatalf("GetResource() = %v, %v", status(r), err)
		}
		h := r.HTTPResponse.Header
		if string(r.Body) != "v1" || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Fencing-Token") != strconv.FormatInt(b.Token, 10) || h.Get("ETag") != `"1"` {
			t.Errorf("GetResource() = %q, Content-Type %q, Fencing-Token %q, ETag %q; want v1 untouched by the refused writes",
				r.Body, h.Get("Content-Type"), h.Get("Fencing-Token"), h.Get("ETag"))
		}
		// A stored value is never a page of this origin (TestBrowser/StoredHTMLCannotRevoke).
		for k, want := range map[string]string{"Content-Disposition": `attachment; filename="orders"`,
			"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox; default-src 'none'"} {
			if got := h.Get(k); got != want {
				t.Errorf("GetResource() %s = %q, want %q", k, got, want)
			}
		}
	})
	t.Run("Writers", func(t *testing.T) {
		put(b.Token, nil, "v2")
		r, err := e.c.ListResourceWritersWithResponse(e.ctx, "orders")
		if err != nil || r.JSON200 == nil {
			t.Fatalf("ListResourceWriters() = %v %s, %v", status(r), r.Body, err)
		}
		at := wiretime.From(t0.Add(time.Second))
		want := []api.ResourceWrite{
			{Version: 2, Token: b.Token, Lease: ptr("job"), Holder: ptr("w2"), At: at, Size: 2, ContentType: "text/plain; charset=utf-8"}, // the token's lease
			{Version: 1, Token: b.Token, Lease: ptr("job"), Holder: ptr("w2"), At: at, Size: 2, ContentType: "text/plain; charset=utf-8"},
		}
		if diff := cmp.Diff(want, r.JSON200.Writers); diff != "" {
			t.Errorf("ListResourceWriters() newest first, without the refused writes (-want +got):\n%s", diff)
		}
		nf, err := e.c.ListResourceWritersWithResponse(e.ctx, "never")
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "ListResourceWriters(never written)", nf.HTTPResponse, nf.Body, http.StatusNotFound, api.ProblemCodeNotFound)
	})
	t.Run("GetErrNotFound", func(t *testing.T) {
		r, err := e.c.GetResourceWithResponse(e.ctx, "never")
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "GetResource(never written)", r.HTTPResponse, r.Body, http.StatusNotFound, api.ProblemCodeNotFound)
	})
	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		// One such write used to raise the fence past every grant to come.
		rejected := metric(t, e.reg, "leasekeeper_stale_writes_rejected_total", map[string]string{"source": "resource"})
		r, err := e.c.PutResourceWithBodyWithResponse(e.ctx, "bricked", &api.PutResourceParams{FencingToken: ptr(lease.MaxToken)}, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, "PutResource(token never issued)", r.HTTPResponse, r.Body, http.StatusConflict, api.ProblemCodeTokenNotIssued)
		if p.PresentedToken == nil || *p.PresentedToken != lease.MaxToken || p.CurrentFence == nil || *p.CurrentFence != 0 {
			t.Errorf("problem tokens = %v / %v, want %d / 0", p.PresentedToken, p.CurrentFence, lease.MaxToken)
		}
		if got := metric(t, e.reg, "leasekeeper_stale_writes_rejected_total", map[string]string{"source": "resource"}); got != rejected+1 {
			t.Errorf("stale writes rejected = %v, want %v", got, rejected+1)
		}
		list, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Resource: ptr("bricked")})
		if err != nil || list.JSON200 == nil || len(list.JSON200.Rejections) != 1 || list.JSON200.Rejections[0].Reason == nil ||
			!strings.Contains(*list.JSON200.Rejections[0].Reason, "never issued") {
			t.Errorf("ListRejections(bricked) = %v %s, %v; want the refusal, saying the token was never issued", status(list), list.Body, err)
		}
		if ok := writeValue(t, e, "bricked", b.Token); ok.JSON201 == nil {
			t.Errorf("PutResource(an issued token) after the refusal = %v %s, want 201", status(ok), ok.Body)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		if r := writeValue(t, e, "to-delete", b.Token); r.JSON201 == nil {
			t.Fatalf("PutResource(to-delete) = %v %s", status(r), r.Body)
		}
		d, err := e.c.DeleteResourceWithResponse(e.ctx, "to-delete")
		if err != nil || d.StatusCode() != http.StatusNoContent {
			t.Fatalf("DeleteResource() = %v, %v; want 204", status(d), err)
		}
		g, err := e.c.GetResourceWithResponse(e.ctx, "to-delete")
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "GetResource(deleted)", g.HTTPResponse, g.Body, http.StatusNotFound, api.ProblemCodeNotFound)
		d, err = e.c.DeleteResourceWithResponse(e.ctx, "to-delete")
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "DeleteResource(again)", d.HTTPResponse, d.Body, http.StatusNotFound, api.ProblemCodeNotFound)
		if r := writeValue(t, e, "to-delete", a.Token); r.JSON201 == nil || r.JSON201.Version != 1 {
			t.Errorf("PutResource(lower token after delete) = %v %s, want 201 at version 1", status(r), r.Body)
		}
	})
	t.Run("ErrPreconditionWithoutToken", func(t *testing.T) {
		resp, body := e.do(http.MethodPut, "/v1/resources/orders", strings.NewReader("x"), nil)
		wantProblem(t, "PUT without Fencing-Token", resp, body, http.StatusPreconditionRequired, api.ProblemCodePreconditionRequired)
	})
	t.Run("ErrInvalidMalformedToken", func(t *testing.T) {
		// An empty header is present but malformed: 400, not 428.
		for _, tok := range []string{"abc", "1.5", "-1", "9007199254740992", "99999999999999999999", "", "0x10"} {
			resp, body := e.do(http.MethodPut, "/v1/resources/orders", strings.NewReader("x"), map[string]string{"Fencing-Token": tok})
			wantProblem(t, "PUT with Fencing-Token "+strconv.Quote(tok), resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		}
	})
	t.Run("Rejections", func(t *testing.T) {
		r, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Resource: ptr("orders")})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("ListRejections() = %v, %v", status(r), err)
		}
		if n := len(r.JSON200.Rejections); n != 2 {
			t.Fatalf("rejections = %d, want 2 (the two stale writes, newest first)", n)
		}
		got := r.JSON200.Rejections[1]
		if got.PresentedToken != a.Token || got.CurrentFence != b.Token || got.Source != api.Leasekeeper || got.Holder == nil || *got.Holder != "w1" {
			t.Errorf("oldest rejection = %+v, want w1's token %d below fence %d", got, a.Token, b.Token)
		}
	})
	t.Run("ReportRejection", func(t *testing.T) {
		r, err := e.c.ReportRejectionWithResponse(e.ctx, api.RejectionReport{Resource: "ext-db", PresentedToken: a.Token, CurrentFence: b.Token, Reason: ptr("row fence")})
		if err != nil || r.JSON202 == nil {
			t.Fatalf("ReportRejection() = %v, %v; want 202", status(r), err)
		}
		if r.JSON202.Source != api.External || r.JSON202.Lease == nil || *r.JSON202.Lease != "job" {
			t.Errorf("ReportRejection() = %+v, want external, lease found by token", r.JSON202)
		}
		bad, err := e.c.ReportRejectionWithResponse(e.ctx, api.RejectionReport{Resource: "ext-db", PresentedToken: 5, CurrentFence: 5})
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "ReportRejection(token not below fence)", bad.HTTPResponse, bad.Body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		list, err := e.c.ListRejectionsWithResponse(e.ctx, &api.ListRejectionsParams{Lease: ptr("job"), Limit: ptr(1)})
		if err != nil || list.JSON200 == nil || len(list.JSON200.Rejections) != 1 || list.JSON200.Rejections[0].Resource != "ext-db" || list.JSON200.NextCursor == "" {
			t.Errorf("ListRejections(lease job, limit 1) = %v %s, %v; want the external one first, and a cursor", status(list), list.Body, err)
		}
	})
}

// writeValue makes a fenced write of "v" to resource with token.
func writeValue(t *testing.T, e *env, resource string, token int64) *api.PutResourceResponse {
	t.Helper()
	r, err := e.c.PutResourceWithBodyWithResponse(e.ctx, resource, &api.PutResourceParams{FencingToken: &token}, "text/plain", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServiceEndpoints(t *testing.T) {
	e := newEnv(t)
	t.Run("Healthz", func(t *testing.T) {
		r, err := e.c.HealthzWithResponse(e.ctx)
		if err != nil || r.JSON200 == nil || r.JSON200.Status != "ok" {
			t.Errorf("Healthz() = %v, %v", status(r), err)
		}
	})
	t.Run("Readyz", func(t *testing.T) {
		r, err := e.c.ReadyzWithResponse(e.ctx)
		if err != nil || r.JSON200 == nil || r.JSON200.Status != "ok" {
			t.Errorf("Readyz() = %v, %v", status(r), err)
		}
	})
	t.Run("OpenAPI", func(t *testing.T) {
		resp, body := e.do(http.MethodGet, "/openapi.yaml", nil, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, leasekeeper.OpenAPI()) || !strings.Contains(resp.Header.Get("Content-Type"), "yaml") {
			t.Errorf("GET /openapi.yaml = %d %q (%d bytes), want 200 with the spec", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		e.acquire("job", "w1", time.Minute)
		resp, body := e.do(http.MethodGet, "/metrics", nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %d", resp.StatusCode)
		}
		for _, want := range []string{"leasekeeper_leases_held 1", `leasekeeper_lease_operations_total{op="acquire",outcome="ok"} 1`,
			`leasekeeper_http_request_duration_seconds_count{code="200",method="POST",route="/v1/leases/{name}/acquire"} 1`} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("GET /metrics lacks %q", want)
			}
		}
		if bytes.Contains(body, []byte(`route="/v1/leases/job`)) {
			t.Errorf("GET /metrics labels a route with a lease name")
		}
	})
	t.Run("ReadyzUnavailable", func(t *testing.T) {
		e := newEnv(t)
		e.store.Close()
		r, err := e.c.ReadyzWithResponse(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantProblem(t, "Readyz(database closed)", r.HTTPResponse, r.Body, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
		resp, body := e.do(http.MethodGet, "/healthz", nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz with the database closed = %d %s, want 200 (liveness)", resp.StatusCode, body)
		}
	})
}
