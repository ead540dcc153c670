package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/web"
)

var viewT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func viewAt(offset string) time.Time {
	d, err := time.ParseDuration(offset)
	if err != nil {
		panic(err)
	}
	return viewT0.Add(d)
}

// viewHistory is a name's events: a release, an expiry after a grant with its own lock delay,
// a revoke, and the current grant, with two stale writes refused on the way.
func viewHistory() []lease.Event {
	return []lease.Event{
		{Seq: 1, Type: lease.EventAcquired, Token: 1, Holder: "w1", At: viewAt("-6m"), ExpiresAt: viewAt("-5m20s")},
		{Seq: 2, Type: lease.EventReleased, Token: 1, Holder: "w1", At: viewAt("-4m20s")},
		{Seq: 3, Type: lease.EventAcquired, Token: 2, Holder: "w2", At: viewAt("-4m"), ExpiresAt: viewAt("-3m20s"), LockDelay: 20 * time.Second},
		{Seq: 4, Type: lease.EventRenewed, Token: 2, Holder: "w2", At: viewAt("-3m20s"), ExpiresAt: viewAt("-2m30s")},
		{Seq: 5, Type: lease.EventExpired, Token: 2, Holder: "w2", At: viewAt("-2m30s")},
		{Seq: 6, Type: lease.EventAcquired, Token: 3, Holder: "w3", At: viewAt("-2m10s"), ExpiresAt: viewAt("-1m30s")},
		{Seq: 7, Type: lease.EventRejected, Token: 2, Holder: "w2", At: viewAt("-2m5s"), Resource: "db"},
		{Seq: 8, Type: lease.EventRevoked, Token: 3, Holder: "w3", At: viewAt("-1m20s")},
		{Seq: 9, Type: lease.EventAcquired, Token: 4, Holder: "w1", At: viewAt("-1m"), ExpiresAt: viewAt("-20s"), LockDelay: 15 * time.Second},
		{Seq: 10, Type: lease.EventRejected, Token: 3, Holder: "w3", At: viewAt("-50s"), Resource: "db"},
		{Seq: 11, Type: lease.EventRenewed, Token: 4, Holder: "w1", At: viewAt("-10s"), ExpiresAt: viewAt("30s")},
	}
}

func viewHeld() lease.State {
	return lease.State{Name: "job", Held: true, Holder: "w1", Token: 4, AcquiredAt: viewAt("-1m"), RenewedAt: viewAt("-10s"),
		ExpiresAt: viewAt("30s"), TTL: 40 * time.Second, LockDelay: 15 * time.Second}
}

func TestTimelineOf(t *testing.T) {
	tl := timelineOf(viewHeld(), viewHistory(), viewAt("-5m"), viewAt("1m"), viewT0)
	want := []web.Grant{
		{Token: 1, Holder: "w1", AcquiredAt: viewAt("-6m"), ExpiresAt: viewAt("-5m20s"), EndedAt: viewAt("-4m20s"), End: "released"},
		// An earlier grant keeps its own lock delay, from its acquired event.
		{Token: 2, Holder: "w2", AcquiredAt: viewAt("-4m"), ExpiresAt: viewAt("-2m30s"), EndedAt: viewAt("-2m30s"), End: "expired", LockDelay: 20 * time.Second},
		{Token: 3, Holder: "w3", AcquiredAt: viewAt("-2m10s"), ExpiresAt: viewAt("-1m30s"), EndedAt: viewAt("-1m20s"), End: "revoked"},
		{Token: 4, Holder: "w1", AcquiredAt: viewAt("-1m"), ExpiresAt: viewAt("30s"), LockDelay: 15 * time.Second},
	}
	if diff := cmp.Diff(want, tl.Grants); diff != "" {
		t.Errorf("timelineOf().Grants (-want +got):\n%s", diff)
	}
	wantRej := []web.Rejection{
		{ID: 7, Resource: "db", Lease: "job", PresentedToken: 2, Holder: "w2", At: viewAt("-2m5s"), GrantsBehind: -1},
		{ID: 10, Resource: "db", Lease: "job", PresentedToken: 3, Holder: "w3", At: viewAt("-50s"), GrantsBehind: -1},
	}
	if diff := cmp.Diff(wantRej, tl.Rejections); diff != "" {
		t.Errorf("timelineOf().Rejections (-want +got):\n%s", diff)
	}

	t.Run("HeldWithoutEvents", func(t *testing.T) {
		tl := timelineOf(viewHeld(), nil, viewAt("-5m"), viewAt("1m"), viewT0)
		want := []web.Grant{{Token: 4, Holder: "w1", AcquiredAt: viewAt("-1m"), ExpiresAt: viewAt("30s"), LockDelay: 15 * time.Second}}
		if diff := cmp.Diff(want, tl.Grants); diff != "" {
			t.Errorf("timelineOf(held, no events).Grants (-want +got):\n%s", diff)
		}
	})
	t.Run("MissingEnd", func(t *testing.T) {
		evs := []lease.Event{
			{Seq: 1, Type: lease.EventRenewed, Token: 5, Holder: "a", At: viewAt("-3m"), ExpiresAt: viewAt("-2m")},
			{Seq: 2, Type: lease.EventAcquired, Token: 6, Holder: "b", At: viewAt("-1m"), ExpiresAt: viewAt("1m")},
		}
		st := lease.State{Name: "n", Held: true, Token: 6, Holder: "b", ExpiresAt: viewAt("1m")}
		tl := timelineOf(st, evs, viewAt("-5m"), viewAt("1m"), viewT0)
		want := []web.Grant{
			{Token: 5, Holder: "a", ExpiresAt: viewAt("-2m"), EndedAt: viewAt("-1m")},
			{Token: 6, Holder: "b", AcquiredAt: viewAt("-1m"), ExpiresAt: viewAt("1m")},
		}
		if diff := cmp.Diff(want, tl.Grants); diff != "" {
			t.Errorf("timelineOf(missing end).Grants (-want +got):\n%s", diff)
		}
	})
	t.Run("RevokedEndsWhereRevoked", func(t *testing.T) {
		// A revoked lease's grant ends at the revoke, not at its cancelled expiry.
		st := lease.State{Name: "n", Token: 7, Holder: "c", ExpiresAt: viewAt("9m"), EndedAt: viewAt("-1m"), End: lease.EndRevoked}
		evs := []lease.Event{{Seq: 1, Type: lease.EventAcquired, Token: 7, Holder: "c", At: viewAt("-2m"), ExpiresAt: viewAt("9m")}}
		tl := timelineOf(st, evs, viewAt("-5m"), viewAt("1m"), viewT0)
		if g := tl.Grants[0]; !g.EndedAt.Equal(viewAt("-1m")) || g.End != "revoked" {
			t.Errorf("revoked grant ends %v %q, want at the revoke", g.EndedAt, g.End)
		}
	})
}

func TestStaleness(t *testing.T) {
	evs := viewHistory()
	tests := []struct {
		name   string
		x      lease.Rejection
		behind int
		late   time.Duration
	}{
		{"TwoBehind", lease.Rejection{PresentedToken: 2, CurrentFence: 4, At: viewAt("-2m21700ms")}, 2, 8300 * time.Millisecond},
		{"OneBehind", lease.Rejection{PresentedToken: 3, CurrentFence: 4, At: viewAt("-50s")}, 1, 30 * time.Second},
		{"FenceNotInHistory", lease.Rejection{PresentedToken: 3, CurrentFence: 9, At: viewAt("-50s")}, -1, 30 * time.Second},
		{"Unknown", lease.Rejection{PresentedToken: 8, CurrentFence: 9, At: viewAt("-50s")}, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			behind, late := staleness(tt.x, evs)
			if behind != tt.behind || late != tt.late {
				t.Errorf("staleness(%d against %d) = %d, %v; want %d, %v", tt.x.PresentedToken, tt.x.CurrentFence, behind, late, tt.behind, tt.late)
			}
		})
	}
}
