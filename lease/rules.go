package lease

import (
	"fmt"
	"time"
)

// Grant is one grant of a name as the lease rules see it: what every backend knows of a name's
// current grant, whichever way it read it. A zero EndedAt means the grant has not been ended
// (it may still have expired by the clock: see Settle).
type Grant struct {
	Name       string
	Holder     string
	Token      int64
	TTL        time.Duration
	LockDelay  time.Duration
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	EndedAt    time.Time
	End        End
}

// Open reports whether the grant has not been ended, whatever its expiry.
func (g Grant) Open() bool { return g.End == "" }

// HeldAt reports whether the grant is an unexpired lease at now (invariant 1: at most one such
// grant per name).
func (g Grant) HeldAt(now time.Time) bool { return g.Open() && g.ExpiresAt.After(now) }

// AvailableAt is when the name may be granted again: at once after a release or a revoke, and
// only after the lock delay once the grant expired (or will expire).
func (g Grant) AvailableAt() time.Time {
	switch g.End {
	case "":
		return g.ExpiresAt.Add(g.LockDelay)
	case EndExpired:
		return g.EndedAt.Add(g.LockDelay)
	}
	return g.EndedAt
}

// Settle returns the grant as it stands at now: an open grant past its expiry has expired, at
// its expiry (not when it was noticed). expired reports that Settle ended it, so the caller
// records the expiry.
func Settle(g Grant, now time.Time) (settled Grant, expired bool) {
	if g.Open() && !g.ExpiresAt.After(now) {
		g.End, g.EndedAt = EndExpired, g.ExpiresAt
		return g, true
	}
	return g, false
}

// State is what anyone may see of the grant at now (never its lease ID); an expired grant not
// yet settled reads as expired at its expiry.
func (g Grant) State(now time.Time) State {
	g, _ = Settle(g, now)
	st := State{
		Name: g.Name, Holder: g.Holder, Token: g.Token, TTL: g.TTL,
		AcquiredAt: g.AcquiredAt, RenewedAt: g.RenewedAt, ExpiresAt: g.ExpiresAt,
		LockDelay: g.LockDelay, AvailableAt: g.AvailableAt(),
	}
	if g.Open() {
		st.Held = true
	} else {
		st.EndedAt, st.End = g.EndedAt, g.End
	}
	return st
}

// DecideAcquire decides an acquire of a name whose current grant is cur (exists false for a
// name never used), settled at now (see Settle), given the last token ever issued: the token of
// the new grant (invariant 2), or lease_held while cur is held or in its lock delay.
func DecideAcquire(cur Grant, exists bool, now time.Time, last int64) (int64, error) {
	if exists && (cur.HeldAt(now) || cur.End == EndExpired && cur.AvailableAt().After(now)) {
		return 0, heldError(cur, now)
	}
	return NextToken(last, now)
}

func heldError(g Grant, now time.Time) *Error {
	st := g.State(now)
	e := Errorf(CodeHeld, "lease %q is held by %q until %s", g.Name, g.Holder, st.ExpiresAt.Format(time.RFC3339Nano))
	if !st.Held {
		e.Message = fmt.Sprintf("lease %q is in its lock delay until %s", g.Name, st.AvailableAt.Format(time.RFC3339Nano))
	}
	e.Holder, e.ExpiresAt, e.AvailableAt = g.Holder, st.ExpiresAt, st.AvailableAt
	return e
}

// CheckHeldCap refuses an acquire by an owner that already holds held unexpired leases when
// it may hold at most maxHeld (0: no cap).
func CheckHeldCap(held, maxHeld int) error {
	if maxHeld > 0 && held >= maxHeld {
		return Errorf(CodeTooManyLeases, "this API key holds %d leases, the most one key may hold", held)
	}
	return nil
}

// CheckSessionCap refuses to open a session for an owner that already has open sessions open
// (neither closed nor expired) when it may have at most maxOpen (0: no cap).
func CheckSessionCap(open, maxOpen int) error {
	if maxOpen > 0 && open >= maxOpen {
		return Errorf(CodeTooManySessions, "this API key has %d sessions open, the most one key may have: close one, or let it expire", open)
	}
	return nil
}

// NewGrant is the grant an acquire decided by DecideAcquire writes.
func NewGrant(name, holder string, token int64, ttl, lockDelay time.Duration, now time.Time) Grant {
	return Grant{Name: name, Holder: holder, Token: token, TTL: ttl, LockDelay: lockDelay,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(ttl)}
}

// DecideRenew decides a renewal of g, the grant the presented lease ID belongs to, settled at
// now: g extended to now + ttl (ttl 0 keeps the grant's), or lease_lost when g is no longer
// held (invariant 6).
func DecideRenew(g Grant, ttl time.Duration, now time.Time) (Grant, error) {
	if !g.HeldAt(now) {
		return g, lostError(g)
	}
	if ttl > 0 {
		g.TTL = ttl
	}
	g.RenewedAt, g.ExpiresAt = now, now.Add(g.TTL)
	return g, nil
}

func lostError(g Grant) *Error {
	return Errorf(CodeLost, "lease %q token %d %s at %s", g.Name, g.Token, g.End, g.EndedAt.UTC().Format(time.RFC3339Nano))
}

// DecideRelease decides a release of g, the grant the presented lease ID belongs to, settled
// at now: end reports that g ends now as released; a repeat of a release changes nothing and
// is not an error; a grant that expired or was revoked is lease_lost, so its holder learns its
// work may have overlapped another's.
func DecideRelease(g Grant, now time.Time) (end bool, err error) {
	switch {
	case g.HeldAt(now):
		return true, nil
	case g.End == EndReleased:
		return false, nil
	}
	return false, lostError(g)
}

// DecideRevoke decides an admin's revoke of cur, the current grant of name (exists false for
// a name never used), settled at now. With a non-zero token it ends the grant only if it is
// that token's and still open, so a revoke aimed at one holder never ends a successor's. end
// reports that cur ends now as revoked; revoking an ended grant without a token changes nothing.
func DecideRevoke(cur Grant, exists bool, name string, token int64) (end bool, err error) {
	if !exists {
		return false, Errorf(CodeNotFound, "no lease named %q was ever taken", name)
	}
	if token != 0 && cur.Token != token {
		return false, Errorf(CodeLost, "lease %q is now token %d held by %q, not token %d; nothing was revoked", name, cur.Token, cur.Holder, token)
	}
	if token != 0 && !cur.Open() {
		return false, Errorf(CodeLost, "lease %q token %d has already %s; nothing was revoked", name, token, cur.End)
	}
	return cur.Open(), nil
}

// FencedWrite is what a fenced write decides with: the presented token, the resource's fence
// (0 for a new resource), the last token ever issued, and with a Lease-Name the current grant
// of that lease (settled at now; LeaseExists false for a name never used).
type FencedWrite struct {
	Resource    string
	Token       int64
	Fence       int64
	LastToken   int64
	LeaseName   string
	Lease       Grant
	LeaseExists bool
	// Shared says the token is a shared (read) grant's: the write is refused, whatever the
	// fence (shared_token).
	Shared bool
	// Scoped is set for a caller limited to some names, whose LastToken is ScopedLastToken:
	// a refusal then names no bound, which would be nobody's to tell.
	Scoped bool
}

// DecideFencedWrite decides a fenced write (invariant 7): nil when it applies (the resource's
// fence becomes w.Token), else the rejection to record and answer: token_not_issued for a token
// above every token issued (accepted, it would raise the fence past every grant to come), or
// shared_token for a shared grant's token, or stale_token. The error carries the presented token and the fence to report.
func DecideFencedWrite(w FencedWrite, now time.Time) *Error {
	reject := func(code Code, current int64, format string, args ...any) *Error {
		e := Errorf(code, format, args...)
		e.PresentedToken, e.CurrentFence = w.Token, current
		return e
	}
	// last_token is the high-water mark of issued tokens: a token above it was made up (or
	// comes from before a restore of an older backup, whose lease this store never knew).
	if w.Token > w.LastToken && w.Scoped {
		return reject(CodeNotIssued, w.Fence, "token %d was not issued to a lease within this key's scope", w.Token)
	}
	if w.Token > w.LastToken {
		return reject(CodeNotIssued, w.Fence, "token %d was never issued by this server (the highest issued is %d)", w.Token, w.LastToken)
	}
	if w.Shared {
		return reject(CodeSharedToken, w.Fence, "token %d is a shared (read) grant's; a shared lease may not write resource %q", w.Token, w.Resource)
	}
	if w.Token < w.Fence {
		return reject(CodeStale, w.Fence, "token %d is below the fence %d of resource %q", w.Token, w.Fence, w.Resource)
	}
	if w.LeaseName == "" {
		return nil
	}
	g := w.Lease
	switch {
	case !w.LeaseExists:
		return reject(CodeStale, w.Fence, "lease %q was never taken", w.LeaseName)
	case g.Token != w.Token:
		return reject(CodeStale, max(w.Fence, g.Token), "token %d is not the current token %d of lease %q", w.Token, g.Token, w.LeaseName)
	case !g.HeldAt(now):
		return reject(CodeStale, w.Fence, "lease %q token %d has %s", w.LeaseName, g.Token, g.End)
	}
	return nil
}

// AnyVersion as a write's ifVersion matches every version of a resource that exists (HTTP
// If-Match: *).
const AnyVersion int64 = -1

// DecideWriteCondition checks a conditional write's condition against the resource's current
// version (0 when it does not exist): ifVersion above 0 must equal it, AnyVersion needs one,
// and ifAbsent needs none. It runs after DecideFencedWrite, which a stale token fails whatever
// the condition.
func DecideWriteCondition(ifVersion int64, ifAbsent bool, version int64) *Error {
	switch {
	case ifVersion == AnyVersion && version == 0:
		return Errorf(CodePreconditionFailed, "the write required that the resource exist (If-Match: *); it does not")
	case ifAbsent && version > 0:
		return Errorf(CodePreconditionFailed, "the resource exists (version %d) and the write required that it did not", version)
	case ifVersion > 0 && ifVersion != version:
		if version == 0 {
			return Errorf(CodePreconditionFailed, "the write required version %d; the resource does not exist", ifVersion)
		}
		return Errorf(CodePreconditionFailed, "the write required version %d; the resource is at version %d", ifVersion, version)
	}
	return nil
}
