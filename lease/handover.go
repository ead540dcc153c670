package lease

import (
	"time"
	"unicode/utf8"
)

// Handover is a cooperative request that the holder of a grant let it go: its renewals say
// so, and when To names a holder waiting in line, that holder is granted first once the grant
// ends. Nothing is forced; revoke stays the admin's tool.
type Handover struct {
	Name   string    // the lease
	Holder string    // the holder of the grant asked
	Token  int64     // the grant asked to let go
	To     string    // the holder preferred next; empty for whoever waits first
	Reason string    // free text for humans
	By     string    // who asked: "label (key id)"
	At     time.Time // when, by the server's clock
}

// MaxReasonLen bounds a handover's reason, in bytes.
const MaxReasonLen = 1024

// ValidateHandover checks a handover request's target (empty, or a valid holder) and reason.
func ValidateHandover(to, reason string) error {
	if to != "" {
		if err := ValidateHolder(to); err != nil {
			return invalid("to", "to must be a valid holder (%s)", err.(*Error).Message)
		}
	}
	if len(reason) > MaxReasonLen || !utf8.ValidString(reason) {
		return invalid("reason", "reason must be valid UTF-8 of at most %d bytes", MaxReasonLen)
	}
	return nil
}

// DecideHandover decides a request that the holder of cur, the current grant of name (exists
// false for a name never used), settled at now, hand it over: the request to record, for
// cur's token; not_found for a name never used, not_held when no one holds it now,
// invalid_request when To names the holder itself (a handover to the holder has no meaning:
// it would ask the holder to let go and then be granted again, first in line).
func DecideHandover(cur Grant, exists bool, name string, h Handover, now time.Time) (Handover, error) {
	if !exists {
		return h, Errorf(CodeNotFound, "no lease named %q was ever taken", name)
	}
	if !cur.HeldAt(now) {
		return h, Errorf(CodeNotHeld, "lease %q is not held (token %d %s): there is nothing to hand over", name, cur.Token, cur.State(now).End)
	}
	if h.To != "" && h.To == cur.Holder {
		return h, invalid("to", "to names %q, which holds lease %q now: a handover goes to another holder", h.To, name)
	}
	h.Name, h.Holder, h.Token, h.At = name, cur.Holder, cur.Token, now
	return h, nil
}

// Waiter is a request in a name's line, as the handover rule sees it: the holder it is for,
// and whether it waits for several names at once.
type Waiter struct {
	Holder string
	Multi  bool
}

// HandedFirst returns the index in line (oldest first) of the waiter that goes first once the
// grant that a handover request naming to asked about has ended: the oldest waiter of holder to,
// unless it waits for several names at once (moved ahead in this line only, it could stand
// before another waiter here and behind it in another line, and both would wait for ever). -1
// when there is none: then the oldest goes first, as always.
func HandedFirst(line []Waiter, to string) int {
	if to == "" {
		return -1
	}
	for i, w := range line {
		if w.Holder == to && !w.Multi {
			return i
		}
	}
	return -1
}
