// Package wire is the wire form of the domain's values: lease's types as the api types
// generated from openapi.yaml, and the hand-written JSON of the hot routes' answers (acquire,
// renew, a fenced write) and of the watch stream's events.
package wire

import (
	"encoding/json"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

// Time is t on the wire: UTC with exactly three fractional digits (wiretime).
func Time(t time.Time) api.Timestamp { return wiretime.From(t) }

// OptTime is t on the wire, nil for the zero time.
func OptTime(t time.Time) *api.Timestamp {
	if t.IsZero() {
		return nil
	}
	return ptr(Time(t))
}

// Metadata is a lease's metadata on the wire, nil for none.
func Metadata(raw json.RawMessage) *api.Metadata {
	if len(raw) == 0 {
		return nil
	}
	var m api.Metadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	return &m
}

// Lease is a grant or renewal answer of the server started as epoch. The answers share
// epoch, which never changes, rather than each taking a copy.
func Lease(l lease.Lease, epoch *string) api.Lease {
	out := api.Lease{
		Name: l.Name, Holder: l.Holder, Token: l.Token, TtlMs: l.TTL.Milliseconds(),
		AcquiredAt: Time(l.AcquiredAt), RenewedAt: Time(l.RenewedAt), ExpiresAt: Time(l.ExpiresAt),
		LockDelayMs: l.LockDelay.Milliseconds(), Metadata: Metadata(l.Metadata), ServerEpoch: epoch,
	}
	if l.ID != "" {
		out.LeaseId = ptr(l.ID)
	}
	if ms := l.ExtendedByRestart.Milliseconds(); ms > 0 {
		out.ExtendedByRestartMs = ptr(ms)
	}
	if l.Handover != nil {
		out.HandoverRequested = ptr(Handover(*l.Handover))
	}
	if l.Session != "" {
		out.Session = ptr(l.Session)
	}
	if l.Limit > 0 {
		out.Limit, out.Slot = ptr(l.Limit), ptr(l.Slot)
	}
	switch {
	case l.Mode == lease.ModeShared:
		out.Mode, out.Slot = ptr(api.LeaseModeShared), ptr(l.Slot)
	case l.Limit == 0:
		out.Mode = ptr(api.LeaseModeExclusive)
	}
	return out
}

// Handover is a pending handover request on the wire.
func Handover(h lease.Handover) api.Handover {
	out := api.Handover{Name: h.Name, Holder: h.Holder, Token: h.Token, RequestedAt: Time(h.At)}
	for _, f := range []struct {
		dst **string
		v   string
	}{{&out.To, h.To}, {&out.Reason, h.Reason}, {&out.RequestedBy, h.By}} {
		if f.v != "" {
			*f.dst = ptr(f.v)
		}
	}
	return out
}

// State is a lease's state on the wire (never its lease_id); a name neither shared nor a
// semaphore says it is exclusive.
func State(st lease.State) api.LeaseState {
	out := stateAsIs(st)
	if st.Limit == 0 && st.Mode == "" {
		out.Mode = ptr(api.LeaseStateModeExclusive)
	}
	return out
}

// stateAsIs is a state with its slots, or its shared holders, as they are: a slot's says no
// mode of its own.
func stateAsIs(st lease.State) api.LeaseState {
	out := api.LeaseState{
		Name: st.Name, Held: st.Held, Holder: st.Holder, Token: st.Token, TtlMs: st.TTL.Milliseconds(),
		AcquiredAt: OptTime(st.AcquiredAt), RenewedAt: OptTime(st.RenewedAt), ExpiresAt: OptTime(st.ExpiresAt),
		EndedAt: OptTime(st.EndedAt), LockDelayMs: st.LockDelay.Milliseconds(), AvailableAt: OptTime(st.AvailableAt),
		Metadata: Metadata(st.Metadata), Waiters: st.Waiters,
	}
	if st.End != "" {
		out.End = ptr(api.LeaseStateEnd(st.End))
	}
	if st.Limit > 0 {
		out.Limit = ptr(st.Limit)
		slots := make([]api.LeaseState, 0, len(st.Slots))
		for _, sl := range st.Slots {
			slots = append(slots, stateAsIs(sl))
		}
		out.Slots = &slots
	}
	if st.Mode == lease.ModeShared {
		out.Mode = ptr(api.LeaseStateModeShared)
	}
	if st.Mode == lease.ModeShared && st.Slots != nil {
		holders := make([]api.LeaseState, 0, len(st.Holders))
		for _, h := range st.Holders {
			holders = append(holders, stateAsIs(h))
		}
		out.Holders = &holders
	}
	return out
}

// Event is an event on the wire, as the history and the watch stream show it.
func Event(e lease.Event) api.Event {
	out := api.Event{
		Seq: e.Seq, Type: api.EventType(e.Type), Name: e.Name, Token: e.Token, Holder: e.Holder,
		At: Time(e.At), ExpiresAt: OptTime(e.ExpiresAt), Metadata: Metadata(e.Metadata),
	}
	if e.Resource != "" {
		out.Resource = ptr(e.Resource)
	}
	if e.Actor != "" {
		out.Actor = ptr(e.Actor)
	}
	if e.Session != "" {
		out.Session = ptr(e.Session)
	}
	if e.Mode == lease.ModeShared {
		out.Mode = ptr(api.EventModeShared)
	}
	if h := e.Handover; h != nil {
		out.Handover = &api.HandoverRequest{}
		if h.To != "" {
			out.Handover.To = ptr(h.To)
		}
		if h.Reason != "" {
			out.Handover.Reason = ptr(h.Reason)
		}
	}
	return out
}

// Resource is a fenced resource's state on the wire.
func Resource(r lease.Resource) api.ResourceInfo {
	out := api.ResourceInfo{Resource: r.Name, Fence: r.Fence, Version: r.Version, UpdatedAt: Time(r.UpdatedAt),
		Size: r.Size, ContentType: r.ContentType}
	if r.Lease != "" {
		out.Lease = ptr(r.Lease)
	}
	if r.Holder != "" {
		out.Holder = ptr(r.Holder)
	}
	return out
}

// Write is a resource's recorded write on the wire.
func Write(x lease.Write) api.ResourceWrite {
	out := api.ResourceWrite{Version: x.Version, Token: x.Token, At: Time(x.At), Size: x.Size, ContentType: x.ContentType}
	if x.Lease != "" {
		out.Lease = ptr(x.Lease)
	}
	if x.Holder != "" {
		out.Holder = ptr(x.Holder)
	}
	return out
}

// Rejection is a refused write on the wire.
func Rejection(r lease.Rejection) api.Rejection {
	out := api.Rejection{Id: r.ID, Resource: r.Resource, PresentedToken: r.PresentedToken, CurrentFence: r.CurrentFence,
		At: Time(r.At), Source: api.RejectionSource(r.Source)}
	for _, f := range []struct {
		dst **string
		v   string
	}{{&out.Lease, r.Lease}, {&out.Holder, r.Holder}, {&out.ClientAddr, r.ClientAddr}, {&out.UserAgent, r.UserAgent}, {&out.Reason, r.Reason}} {
		if f.v != "" {
			*f.dst = ptr(f.v)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
