package lease

import (
	"fmt"
	"time"
)

// A name is held in one of two modes. An exclusive grant (the default) is the name's own
// lease: no other grant of the name is unexpired beside it. Shared grants (readers) coexist
// with each other and with nothing else; each is an ordinary lease on a slot "name#i" of the
// name (as a semaphore's, see SlotName), with its own lease ID, token, expiry and lock delay.
// The name's row in the semaphores table says its slots are shared ones; its limit there is
// how many slots were used so far, growing up to MaxShared.

// Mode is how a grant holds its name.
type Mode string

// The modes of a grant.
const (
	ModeExclusive Mode = "exclusive"
	ModeShared    Mode = "shared"
)

// MaxShared bounds the shared grants of one name at once.
const MaxShared = MaxLimit

// ValidateMode checks a requested mode ("" is exclusive): a semaphore (a limit) has no mode.
func ValidateMode(mode string, limit int) (Mode, error) {
	switch Mode(mode) {
	case "":
		return ModeExclusive, nil
	case ModeExclusive, ModeShared:
		if limit > 0 {
			return "", invalid("mode", "mode cannot go with limit: a semaphore's slots are neither shared nor exclusive")
		}
		return Mode(mode), nil
	}
	return "", invalid("mode", "mode must be shared or exclusive, not %q", mode)
}

// Holders is a name as an acquire in either mode sees it, every grant settled at the time of
// the decision: Excl is the name's own (exclusive) grant, ExclExists false for a name whose
// own grant was never made; Shared[i] is the current grant of shared slot i, SharedExists[i]
// false for a slot never used.
type Holders struct {
	Name         string
	Excl         Grant
	ExclExists   bool
	Shared       []Grant
	SharedExists []bool
}

// DecideMode decides an acquire of h.Name in mode: the slot of the shared grant to make (-1
// for the exclusive grant) and its token (invariant 2), or lease_held. An exclusive acquire is
// refused while any grant of the name, shared or not, is unexpired or in its lock delay; a
// shared one only while the exclusive grant is. A shared acquire takes the first slot free of
// its last grant's lock delay, or a new slot after the last, up to MaxShared at once.
func DecideMode(h Holders, mode Mode, now time.Time, last int64) (slot int, token int64, err error) {
	if _, err := DecideAcquire(h.Excl, h.ExclExists, now, last); err != nil {
		return -1, 0, err
	}
	if mode != ModeShared {
		if e := sharedHeld(h, now); e != nil {
			return -1, 0, e
		}
		token, err := NextToken(last, now)
		return -1, token, err
	}
	for i, g := range h.Shared {
		if _, err := DecideAcquire(g, h.SharedExists[i], now, last); err == nil {
			token, err := NextToken(last, now)
			return i, token, err
		}
	}
	if len(h.Shared) >= MaxShared {
		e := Errorf(CodeHeld, "lease %q has %d shared holders, the most a name may have", h.Name, MaxShared)
		if s := sharedHeld(h, now); s != nil {
			e.Holder, e.ExpiresAt, e.AvailableAt = s.Holder, s.ExpiresAt, s.AvailableAt
		}
		return -1, 0, e
	}
	token, err = NextToken(last, now)
	return len(h.Shared), token, err
}

// sharedHeld is lease_held when any shared grant of h is unexpired or in its lock delay, nil
// otherwise: it names the first such holder, and when the last of them lets the name go.
func sharedHeld(h Holders, now time.Time) *Error {
	var e *Error
	n := 0
	for i, g := range h.Shared {
		if !h.SharedExists[i] || !(g.HeldAt(now) || g.End == EndExpired && g.AvailableAt().After(now)) {
			continue
		}
		n++
		st := g.State(now)
		if e == nil {
			e = &Error{Code: CodeHeld, Holder: g.Holder, ExpiresAt: st.ExpiresAt}
		}
		e.AvailableAt = maxTime(e.AvailableAt, st.AvailableAt)
	}
	if e != nil {
		e.Message = fmt.Sprintf("lease %q is held shared by %d holders (%q among them) until %s at the latest", h.Name, n, e.Holder,
			e.AvailableAt.UTC().Format(time.RFC3339Nano))
	}
	return e
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// SumShared sums a shared name's slots up into st: Held while any slot is held, Holders the
// held ones (by slot), Token the highest, ExpiresAt and AvailableAt when the last holder's
// grant ends and the name is free of them all (a writer's wait).
func SumShared(st *State) {
	st.Mode, st.Holders = ModeShared, nil
	for _, sl := range st.Slots {
		st.Token = max(st.Token, sl.Token)
		if sl.Held {
			st.Holders = append(st.Holders, sl)
			st.ExpiresAt = maxTime(st.ExpiresAt, sl.ExpiresAt)
		}
		if sl.Held || sl.End == EndExpired {
			st.AvailableAt = maxTime(st.AvailableAt, sl.AvailableAt)
		}
	}
	st.Held = len(st.Holders) > 0
	if st.Held {
		st.Holder = st.Holders[0].Holder
		return
	}
	// Free: the last grant's holder and how it ended, as for an exclusive name.
	for _, sl := range st.Slots {
		if sl.Token == st.Token {
			st.Holder, st.ExpiresAt, st.EndedAt, st.End, st.TTL = sl.Holder, sl.ExpiresAt, sl.EndedAt, sl.End, sl.TTL
			st.AcquiredAt, st.RenewedAt, st.LockDelay = sl.AcquiredAt, sl.RenewedAt, sl.LockDelay
		}
	}
}

// EventMode is the Mode an event of a grant carries: ModeShared for a shared grant's, none
// otherwise.
func EventMode(shared bool) Mode {
	if shared {
		return ModeShared
	}
	return ""
}

// CheckSharedLimit refuses an acquire with a limit (a semaphore's) of name while shared
// grants of it are held.
func CheckSharedLimit(name string, limit int, sharedHeld bool) error {
	if limit > 0 && sharedHeld {
		return Errorf(CodeLimitMismatch, "%q is held shared; acquire it without a limit", name)
	}
	return nil
}

// SharedGrant says what an acquire that DecideMode granted slot of name (-1: the exclusive
// grant) makes: the grant's name (name itself, or its slot's), and keep, the count of shared
// slots the name's semaphores row must now say (0: it stays as it is), given lim, the slots
// it says now, and whether it says they are shared.
func SharedGrant(name string, slot, lim int, isShared bool) (gname string, keep int) {
	switch {
	case slot < 0:
		return name, 0
	case !isShared || slot >= lim:
		return SlotName(name, slot), max(lim, slot+1)
	}
	return SlotName(name, slot), 0
}

// DecideSharedHandover decides a handover request of a shared name whose shared slots are
// slots (settled at now; exists[i] false for a slot never used): every holder of a held slot
// is asked, each by a request of its own grant, named by its slot. Codes: not_held when none is held,
// invalid_request when h.To names one of them.
func DecideSharedHandover(name string, slots []Grant, exists []bool, h Handover, now time.Time) ([]Handover, error) {
	var out []Handover
	for i, g := range slots {
		if !exists[i] || !g.HeldAt(now) {
			continue
		}
		one, err := DecideHandover(g, true, name, h, now)
		if err != nil {
			return nil, err
		}
		one.Name = g.Name // the slot's, as its renewals and events say
		out = append(out, one)
	}
	if len(out) == 0 {
		return nil, Errorf(CodeNotHeld, "lease %q is not held: there is nothing to hand over", name)
	}
	return out, nil
}
