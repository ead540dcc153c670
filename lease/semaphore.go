package lease

import (
	"strconv"
	"strings"
	"time"
)

// A semaphore is a name acquired with a limit N: up to N holders at once, each holding one of
// N slots. Slot i is an ordinary lease on the name "name#i" (a '#' never appears in a name, so
// slot names collide with none), with its own lease ID, growing token, expiry and lock delay.

// MaxLimit bounds a semaphore's limit.
const MaxLimit = 1000

// SlotName returns the name of slot i of the semaphore name.
func SlotName(name string, i int) string { return name + "#" + strconv.Itoa(i) }

// SlotOf splits a slot's name into its semaphore's name and its index; ok is false for a name
// that is no slot.
func SlotOf(slot string) (name string, i int, ok bool) {
	name, idx, found := strings.Cut(slot, "#")
	if !found {
		return slot, 0, false
	}
	i, err := strconv.Atoi(idx)
	return name, i, err == nil && i >= 0
}

// ValidateLimit checks a requested limit: 0 for a plain lease, else 1 to MaxLimit.
func ValidateLimit(limit int) error {
	if limit < 0 || limit > MaxLimit {
		return invalid("limit", "limit must be between 1 and %d (or absent for a plain lease)", MaxLimit)
	}
	return nil
}

// CheckLimit refuses an acquire of name with limit (0 for a plain lease) while the name is held
// with another one: fixed is the semaphore's limit while any of its slots is held (0 when none
// is), plainHeld whether a plain lease on the name is held.
func CheckLimit(name string, limit, fixed int, plainHeld bool) error {
	switch {
	case limit == 0 && fixed > 0:
		return Errorf(CodeLimitMismatch, "%q is held as a semaphore of limit %d; acquire it with that limit", name, fixed)
	case limit > 0 && plainHeld:
		return Errorf(CodeLimitMismatch, "%q is held as a plain lease; acquire it without a limit", name)
	case limit > 0 && fixed > 0 && limit != fixed:
		return Errorf(CodeLimitMismatch, "%q is held as a semaphore of limit %d, not %d; the limit is fixed while anyone holds it", name, fixed, limit)
	}
	return nil
}

// DecideSemaphore decides an acquire of a semaphore of limit N whose slots are slots (slot i's
// current grant, settled at now, exists[i] false for a slot never used): the first free slot
// and its token, or lease_held with the soonest a slot becomes available.
func DecideSemaphore(name string, slots []Grant, exists []bool, now time.Time, last int64) (slot int, token int64, err error) {
	var soonest *Error
	for i := range slots {
		token, err := DecideAcquire(slots[i], exists[i], now, last)
		if err == nil {
			return i, token, nil
		}
		le, ok := err.(*Error)
		if !ok || le.Code != CodeHeld {
			return 0, 0, err
		}
		if soonest == nil || le.AvailableAt.Before(soonest.AvailableAt) {
			soonest = le
		}
	}
	e := Errorf(CodeHeld, "all %d slots of semaphore %q are held; the first frees at %s", len(slots), name, soonest.AvailableAt.UTC().Format(time.RFC3339Nano))
	e.Holder, e.ExpiresAt, e.AvailableAt = soonest.Holder, soonest.ExpiresAt, soonest.AvailableAt
	return 0, 0, e
}

// SumSlots sums a semaphore's slots up into st: Held when every slot is held (an acquire would
// wait), Token the highest, ExpiresAt the soonest expiry of a held slot and, when full,
// AvailableAt the soonest a slot frees.
func SumSlots(st *State) {
	held := 0
	for _, sl := range st.Slots {
		st.Token = max(st.Token, sl.Token)
		if !sl.Held {
			continue
		}
		held++
		if st.ExpiresAt.IsZero() || sl.ExpiresAt.Before(st.ExpiresAt) {
			st.ExpiresAt = sl.ExpiresAt
		}
		if st.AvailableAt.IsZero() || sl.AvailableAt.Before(st.AvailableAt) {
			st.AvailableAt = sl.AvailableAt
		}
	}
	st.Held = held >= st.Limit
	if !st.Held {
		st.AvailableAt = time.Time{}
	}
}

// DecideRevokeSlots decides an admin's revoke of the semaphore name whose slots are slots
// (settled; exists[i] false for a slot never used): with a token, the one slot holding it
// (lease_lost when none does, or it has ended); without, every open slot.
func DecideRevokeSlots(name string, slots []Grant, exists []bool, token int64) ([]int, error) {
	var end []int
	for i, g := range slots {
		if !exists[i] {
			continue
		}
		if token == 0 && g.Open() {
			end = append(end, i)
		}
		if token != 0 && g.Token == token {
			ended, err := DecideRevoke(g, true, SlotName(name, i), token)
			if ended {
				end = append(end, i)
			}
			return end, err
		}
	}
	if token != 0 {
		return nil, Errorf(CodeLost, "no slot of semaphore %q holds token %d; nothing was revoked", name, token)
	}
	return end, nil
}

// Slotted is what a name with slots keeps of them: a semaphore's Limit, or, with Shared, how
// many shared slots it used so far; Slots are the states of the slots ever used, in order.
type Slotted struct {
	Limit  int
	Shared bool
	Slots  []State
}

// NameState is what name reads as, from its own grant's state own (ownExists false for a name
// whose own grant was never made) and its slots (nil for a name that never had any), every
// state taken at one instant read after all of them. A name used with slots since it was last
// a plain lease reads as its slots summed up (SumSlots, SumShared). Codes: not_found for a
// name never used.
func NameState(name string, own State, ownExists bool, slots *Slotted) (State, error) {
	if slots != nil {
		st := State{Name: name, Limit: slots.Limit, Slots: slots.Slots}
		if slots.Shared {
			st.Limit = 0
			SumShared(&st)
		} else {
			SumSlots(&st)
		}
		if !ownExists || st.Token > own.Token {
			return st, nil
		}
	}
	if !ownExists {
		return State{}, Errorf(CodeNotFound, "no lease named %q was ever taken", name)
	}
	return own, nil
}
