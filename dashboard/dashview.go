package dashboard

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/web"
)

// The dashboard's views are made for its pages; these turn the domain's types into them, so
// that web never repeats lease's types or enums.

func viewLease(st lease.State) web.Lease {
	v := web.Lease{Name: st.Name, Held: st.Held, Holder: st.Holder, Token: st.Token, AcquiredAt: st.AcquiredAt,
		RenewedAt: st.RenewedAt, ExpiresAt: st.ExpiresAt, TTL: st.TTL, LockDelay: st.LockDelay, EndedAt: st.EndedAt,
		Ended: string(st.End), Waiters: st.Waiters, Metadata: st.Metadata, Session: st.Session,
		Stretched: st.ExtendedByRestart}
	if !st.Held && st.AvailableAt.After(st.EndedAt) {
		v.AvailableAt = st.AvailableAt
	}
	if name, i, ok := lease.SlotOf(st.Name); ok {
		v.Name, v.IsSlot, v.Slot = name, true, i
	}
	if st.Mode == lease.ModeShared && st.Slots != nil {
		v.Shared, v.Readers = true, len(st.Holders)
	}
	if st.Limit > 0 {
		// A semaphore's state is held when every slot is; its page and row say how many are.
		v.Limit = st.Limit
		for _, sl := range st.Slots {
			if sl.Held {
				v.SlotsHeld++
				v.TTL = max(v.TTL, sl.TTL)
			}
		}
		v.Held = v.SlotsHeld > 0
		if !v.Held {
			v.ExpiresAt = time.Time{}
		}
	}
	return v
}

// viewSlots lists a semaphore's slots by index.
func viewSlots(st lease.State) []web.Slot {
	var out []web.Slot
	for _, sl := range st.Slots {
		_, i, _ := lease.SlotOf(sl.Name)
		out = append(out, web.Slot{Index: i, Held: sl.Held, Holder: sl.Holder, Token: sl.Token, ExpiresAt: sl.ExpiresAt,
			TTL: sl.TTL, LockDelay: sl.LockDelay, Ended: string(sl.End), Session: sl.Session})
	}
	slices.SortFunc(out, func(a, b web.Slot) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

func viewSession(ss lease.Session) web.SessionInfo {
	return web.SessionInfo{Ref: ss.Ref, Holder: ss.Holder, TTL: ss.TTL, CreatedAt: ss.CreatedAt, RenewedAt: ss.RenewedAt,
		ExpiresAt: ss.ExpiresAt, ClosedAt: ss.ClosedAt, Held: ss.Leases, Metadata: ss.Metadata}
}

func viewEvent(e lease.Event) web.Event {
	v := web.Event{Seq: e.Seq, Kind: string(e.Type), Token: e.Token, Holder: e.Holder, At: e.At,
		Resource: e.Resource, Actor: e.Actor, LockDelay: e.LockDelay}
	if e.Handover != nil {
		v.HandoverTo, v.HandoverReason = e.Handover.To, e.Handover.Reason
	}
	return v
}

func viewRejection(x lease.Rejection) web.Rejection {
	return web.Rejection{ID: x.ID, Resource: x.Resource, Lease: x.Lease, PresentedToken: x.PresentedToken,
		CurrentFence: x.CurrentFence, Holder: x.Holder, ClientAddr: x.ClientAddr, UserAgent: x.UserAgent,
		Reason: x.Reason, External: x.Source == lease.RejectionSourceExternal, At: x.At, GrantsBehind: -1, KeyID: x.KeyID}
}

// viewResource is a resource as who may see it: its last write's lease and holder only when
// that lease is in scope.
func viewResource(who auth.Principal, x lease.Resource) web.Resource {
	l, h := who.Attributed(x.Lease, x.Holder)
	return web.Resource{Name: x.Name, Fence: x.Fence, Version: x.Version, Size: x.Size,
		ContentType: x.ContentType, Lease: l, Holder: h, UpdatedAt: x.UpdatedAt}
}

// viewWrites is a resource's writers as who may see them (see viewResource). A write put
// down to no lease (it named none, and its writer's scope did not reach its token's grant)
// links the grant of its token from grants, as who's own scope allows (lease.Attribute): a
// scoped viewer never learns a name outside its scope.
func viewWrites(who auth.Principal, ws []lease.Write, grants map[int64]store.TokenGrant) []web.Write {
	out := make([]web.Write, len(ws))
	for i, x := range ws {
		l, h := who.Attributed(x.Lease, x.Holder)
		if g, ok := grants[x.Token]; ok && x.Lease == "" {
			l, h = lease.Attribute(who.Scope(), "", g.Name, g.Holder, true)
			l, _, _ = lease.SlotOf(l)
		}
		out[i] = web.Write{Version: x.Version, Token: x.Token, Lease: l, Holder: h, At: x.At,
			Size: x.Size, ContentType: x.ContentType}
	}
	return out
}

// writeGrants finds the grants of the tokens of the writes put down to no lease, for
// viewWrites; a store that cannot answer leaves them unlinked.
func (d *dashboard) writeGrants(ctx context.Context, ws []lease.Write) map[int64]store.TokenGrant {
	var tokens []int64
	for _, x := range ws {
		if x.Lease == "" {
			tokens = append(tokens, x.Token)
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	grants, err := d.s.store.TokenGrants(ctx, tokens)
	if err != nil {
		d.s.log.DebugContext(ctx, "grants of writers' tokens", "err", err)
		return nil
	}
	return grants
}

// keyLabels maps the ids of the keys that sent rejections to their labels; a store that
// cannot answer leaves the ids alone.
func (d *dashboard) keyLabels(ctx context.Context, xs []lease.Rejection) map[string]string {
	if !slices.ContainsFunc(xs, func(x lease.Rejection) bool { return x.KeyID != "" }) {
		return nil
	}
	keys, err := d.s.store.Keys(ctx)
	if err != nil {
		d.s.log.DebugContext(ctx, "labels of rejections' keys", "err", err)
		return nil
	}
	labels := make(map[string]string, len(keys))
	for _, k := range keys {
		labels[k.ID] = k.Label
	}
	return labels
}

// rejectionViews converts rejections and says, where the history of their lease allows, how
// stale each was: how many grants came after the presented token up to the resource's fence,
// and how long after the presented grant ended the write came. It reads the history of each
// lease named once; what it cannot find stays unknown.
func (d *dashboard) rejectionViews(ctx context.Context, xs []lease.Rejection) []web.Rejection {
	oldest := map[string]time.Time{} // lease → the earliest grant it needs to see
	for _, x := range xs {
		if x.Lease == "" || x.CurrentFence <= x.PresentedToken {
			continue
		}
		// A token is at least the unix microseconds of its grant, so the grant was not later.
		t := time.UnixMicro(x.PresentedToken).Add(-time.Minute)
		if o, ok := oldest[x.Lease]; !ok || t.Before(o) {
			oldest[x.Lease] = t
		}
	}
	histories := map[string][]lease.Event{}
	for name, since := range oldest {
		page, err := d.s.store.Events(ctx, store.EventFilter{Name: name, Since: since, Limit: store.MaxLimit})
		if err != nil {
			d.s.log.DebugContext(ctx, "history for rejections", "name", name, "err", err)
			continue
		}
		histories[name] = page.Items
	}
	labels := d.keyLabels(ctx, xs)
	out := make([]web.Rejection, len(xs))
	for i, x := range xs {
		out[i] = viewRejection(x)
		out[i].KeyLabel = labels[x.KeyID]
		if evs, ok := histories[x.Lease]; ok {
			out[i].GrantsBehind, out[i].Late = staleness(x, evs)
		}
	}
	return out
}

// staleness reads a rejected write's lateness from its lease's events (oldest first): the
// grants after the presented token up to the fence, -1 when the fence's grant is not among
// them, and the time from the end of the presented grant to the write, 0 when unknown.
func staleness(x lease.Rejection, evs []lease.Event) (behind int, late time.Duration) {
	behind = -1
	n, sawFence := 0, false
	for _, e := range evs {
		switch {
		case e.Type == lease.EventAcquired && e.Token > x.PresentedToken && e.Token <= x.CurrentFence:
			n++
			sawFence = sawFence || e.Token == x.CurrentFence
		case e.Token == x.PresentedToken && ended(e.Type) && x.At.After(e.At):
			late = x.At.Sub(e.At)
		}
	}
	if sawFence {
		behind = n
	}
	return behind, late
}

// ended reports whether t ends a grant.
func ended(t lease.EventType) bool {
	return t == lease.EventReleased || t == lease.EventExpired || t == lease.EventRevoked
}

// timelineOf builds the timeline of the window [start, end] from a name's state and its
// events (oldest first). Each acquired event starts a grant with its own lock delay, renewed
// events move its expiry, and released, expired and revoked events end it; rejected events
// become ✕ marks. A held grant missing from the events is added from the state.
func timelineOf(st lease.State, evs []lease.Event, start, end, now time.Time) web.Timeline {
	tl := web.Timeline{Name: st.Name, Start: start, End: end, Now: now, Lanes: st.Limit}
	index := map[int64]int{} // token → position in tl.Grants
	grant := func(e lease.Event) *web.Grant {
		i, ok := index[e.Token]
		if !ok {
			i = len(tl.Grants)
			index[e.Token] = i
			tl.Grants = append(tl.Grants, web.Grant{Token: e.Token, Holder: e.Holder, Lane: laneOf(e.Name)})
		}
		return &tl.Grants[i]
	}
	for _, e := range evs {
		switch {
		case e.Type == lease.EventAcquired:
			g := grant(e)
			g.AcquiredAt, g.ExpiresAt, g.LockDelay = e.At, e.ExpiresAt, e.LockDelay
		case e.Type == lease.EventRenewed:
			grant(e).ExpiresAt = e.ExpiresAt
		case ended(e.Type):
			g := grant(e)
			g.EndedAt, g.End = e.At, string(e.Type)
		case e.Type == lease.EventRejected:
			tl.Rejections = append(tl.Rejections, web.Rejection{ID: e.Seq, Resource: e.Resource, Lease: st.Name,
				PresentedToken: e.Token, Holder: e.Holder, At: e.At, GrantsBehind: -1})
		}
	}
	// The state knows the current grants even when their acquire is out of the window: a
	// plain lease's one, or each slot's of a semaphore.
	current := []lease.State{st}
	if st.Limit > 0 {
		current = st.Slots
	}
	for _, c := range current {
		if i, ok := index[c.Token]; ok {
			g := &tl.Grants[i]
			g.LockDelay, g.Stretched = c.LockDelay, c.ExtendedByRestart
			if c.Held {
				g.ExpiresAt = c.ExpiresAt
			}
		} else if c.Held {
			tl.Grants = append(tl.Grants, web.Grant{Token: c.Token, Holder: c.Holder, AcquiredAt: c.AcquiredAt,
				ExpiresAt: c.ExpiresAt, LockDelay: c.LockDelay, Stretched: c.ExtendedByRestart, Lane: laneOf(c.Name)})
		}
	}
	slices.SortStableFunc(tl.Grants, func(a, b web.Grant) int { return cmp.Compare(a.Token, b.Token) })
	if st.Limit > 0 {
		return tl // the slots' grants overlap: one's start says nothing of another's end
	}
	// A grant whose end is missing from the events, followed by a later one, ended no later
	// than its successor began; only the last grant can still be held.
	for i := 0; i+1 < len(tl.Grants); i++ {
		if g := &tl.Grants[i]; g.End == "" && g.EndedAt.IsZero() {
			g.EndedAt = tl.Grants[i+1].AcquiredAt
		}
	}
	// The last grant of a free name ended as the state says, even if its end is not among
	// the events.
	if n := len(tl.Grants); n > 0 && !st.Held && tl.Grants[n-1].Token == st.Token && tl.Grants[n-1].EndedAt.IsZero() {
		tl.Grants[n-1].EndedAt, tl.Grants[n-1].End = st.EndedAt, string(st.End)
	}
	return tl
}

// laneOf is the timeline row of a grant of name: its slot's index for a semaphore's slot,
// else 0.
func laneOf(name string) int {
	_, i, _ := lease.SlotOf(name)
	return i
}
