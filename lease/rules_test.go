package lease

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// held is a grant taken at t0 for 10 s with a lock delay of 5 s.
func held() Grant {
	return NewGrant("job", "w1", 100, 10*time.Second, 5*time.Second, t0)
}

func ended(kind End, at time.Time) Grant {
	g := held()
	g.End, g.EndedAt = kind, at
	return g
}

func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		g       Grant
		now     time.Time
		expired bool
		end     End
	}{
		{"HeldBeforeExpiry", held(), t0.Add(9 * time.Second), false, ""},
		{"ExpiredAtExpiry", held(), t0.Add(10 * time.Second), true, EndExpired},
		{"ReleasedStays", ended(EndReleased, t0.Add(time.Second)), t0.Add(time.Hour), false, EndReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, expired := Settle(tc.g, tc.now)
			if expired != tc.expired || g.End != tc.end {
				t.Errorf("Settle() = %v %v, want %v %v", g.End, expired, tc.end, tc.expired)
			}
			if expired && !g.EndedAt.Equal(tc.g.ExpiresAt) {
				t.Errorf("Settle() ended at %v, want the expiry %v", g.EndedAt, tc.g.ExpiresAt)
			}
		})
	}
}

func TestDecideAcquire(t *testing.T) {
	last := t0.UnixMicro() + 1000 // a token issued "in the future" of the clock
	for _, tc := range []struct {
		name   string
		cur    Grant
		exists bool
		now    time.Time
		code   Code
	}{
		{"OKNeverUsed", Grant{}, false, t0, ""},
		{"ErrHeld", held(), true, t0.Add(time.Second), CodeHeld},
		{"ErrHeldInLockDelay", ended(EndExpired, t0.Add(10*time.Second)), true, t0.Add(14 * time.Second), CodeHeld},
		{"OKAfterLockDelay", ended(EndExpired, t0.Add(10*time.Second)), true, t0.Add(15 * time.Second), ""},
		{"OKReleasedNoLockDelay", ended(EndReleased, t0.Add(time.Second)), true, t0.Add(time.Second), ""},
		{"OKRevokedNoLockDelay", ended(EndRevoked, t0.Add(time.Second)), true, t0.Add(time.Second), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := DecideAcquire(tc.cur, tc.exists, tc.now, last)
			if got := ErrorCode(err); got != tc.code {
				t.Fatalf("DecideAcquire() = %v, want code %q", err, tc.code)
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Holder != "w1" || e.AvailableAt.IsZero() {
					t.Errorf("DecideAcquire() error %+v, want holder and availability", err)
				}
				return
			}
			if want := max(last+1, tc.now.UnixMicro()); tok != want {
				t.Errorf("DecideAcquire() token = %d, want %d", tok, want)
			}
		})
	}
}

func TestHeldErrorInLockDelay(t *testing.T) {
	g := ended(EndExpired, t0.Add(10*time.Second))
	_, err := DecideAcquire(g, true, t0.Add(12*time.Second), 0)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("DecideAcquire() = %v, want lease_held", err)
	}
	if want := t0.Add(15 * time.Second); !e.AvailableAt.Equal(want) {
		t.Errorf("AvailableAt = %v, want %v", e.AvailableAt, want)
	}
}

func TestCaps(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(n, max int) error
		code  Code
	}{{"CheckHeldCap", CheckHeldCap, CodeTooManyLeases}, {"CheckSessionCap", CheckSessionCap, CodeTooManySessions}} {
		for _, tc := range []struct {
			n, max int
			code   Code
		}{{0, 0, ""}, {5, 0, ""}, {4, 5, ""}, {5, 5, c.code}, {6, 5, c.code}} {
			if got := ErrorCode(c.check(tc.n, tc.max)); got != tc.code {
				t.Errorf("%s(%d, %d) = %q, want %q", c.name, tc.n, tc.max, got, tc.code)
			}
		}
	}
}

func TestDecideRenew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		g       Grant
		ttl     time.Duration
		now     time.Time
		code    Code
		expires time.Time
	}{
		{"OKKeepsTTL", held(), 0, t0.Add(time.Second), "", t0.Add(11 * time.Second)},
		{"OKNewTTL", held(), time.Minute, t0.Add(time.Second), "", t0.Add(61 * time.Second)},
		{"ErrLostExpired", ended(EndExpired, t0.Add(10*time.Second)), 0, t0.Add(11 * time.Second), CodeLost, time.Time{}},
		{"ErrLostAtExpiry", held(), 0, t0.Add(10 * time.Second), CodeLost, time.Time{}},
		{"ErrLostReleased", ended(EndReleased, t0), 0, t0, CodeLost, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := DecideRenew(tc.g, tc.ttl, tc.now)
			if got := ErrorCode(err); got != tc.code {
				t.Fatalf("DecideRenew() = %v, want code %q", err, tc.code)
			}
			if err == nil && (!g.ExpiresAt.Equal(tc.expires) || !g.RenewedAt.Equal(tc.now) || g.Token != 100) {
				t.Errorf("DecideRenew() = %+v, want expiry %v, renewed now, same token", g, tc.expires)
			}
		})
	}
}

func TestDecideRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Grant
		end  bool
		code Code
	}{
		{"OK", held(), true, ""},
		{"OKRepeat", ended(EndReleased, t0), false, ""},
		{"ErrLostExpired", ended(EndExpired, t0.Add(10*time.Second)), false, CodeLost},
		{"ErrLostRevoked", ended(EndRevoked, t0), false, CodeLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, err := DecideRelease(tc.g, t0.Add(time.Second))
			if end != tc.end || ErrorCode(err) != tc.code {
				t.Errorf("DecideRelease() = %v, %v; want %v, code %q", end, err, tc.end, tc.code)
			}
		})
	}
}

func TestDecideRevoke(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      Grant
		exists bool
		token  int64
		end    bool
		code   Code
	}{
		{"ErrNotFound", Grant{}, false, 0, false, CodeNotFound},
		{"OK", held(), true, 0, true, ""},
		{"OKToken", held(), true, 100, true, ""},
		{"OKAlreadyEnded", ended(EndReleased, t0), true, 0, false, ""},
		{"ErrLostOtherToken", held(), true, 99, false, CodeLost},
		{"ErrLostEndedToken", ended(EndReleased, t0), true, 100, false, CodeLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, err := DecideRevoke(tc.g, tc.exists, "job", tc.token)
			if end != tc.end || ErrorCode(err) != tc.code {
				t.Errorf("DecideRevoke() = %v, %v; want %v, code %q", end, err, tc.end, tc.code)
			}
		})
	}
}

func TestDecideHandover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      Grant
		exists bool
		to     string
		code   Code
	}{
		{"OK", held(), true, "w2", ""},
		{"OKToNobody", held(), true, "", ""},
		{"ErrNotFound", Grant{}, false, "w2", CodeNotFound},
		{"ErrNotHeld", ended(EndReleased, t0), true, "w2", CodeNotHeld},
		{"ErrInvalidToTheHolder", held(), true, "w1", CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := DecideHandover(tc.g, tc.exists, "job", Handover{To: tc.to}, t0.Add(time.Second))
			if ErrorCode(err) != tc.code || err == nil && (h.Token != 100 || h.Holder != "w1") {
				t.Errorf("DecideHandover(to %q) = %+v, %v; want code %q", tc.to, h, err, tc.code)
			}
		})
	}
}

func TestDecideFencedWrite(t *testing.T) {
	now := t0.Add(time.Second)
	for _, tc := range []struct {
		name  string
		w     FencedWrite
		code  Code
		fence int64
	}{
		{"OKNew", FencedWrite{Token: 100, LastToken: 100}, "", 0},
		{"OKEqualFence", FencedWrite{Token: 100, Fence: 100, LastToken: 100}, "", 0},
		{"ErrNotIssued", FencedWrite{Token: 101, Fence: 7, LastToken: 100}, CodeNotIssued, 7},
		{"ErrStale", FencedWrite{Token: 99, Fence: 100, LastToken: 100}, CodeStale, 100},
		{"OKLease", FencedWrite{Token: 100, LastToken: 100, LeaseName: "job", Lease: held(), LeaseExists: true}, "", 0},
		{"ErrStaleLeaseNeverTaken", FencedWrite{Token: 100, LastToken: 100, LeaseName: "job"}, CodeStale, 0},
		{"ErrStaleNotCurrentToken", FencedWrite{Token: 90, Fence: 50, LastToken: 100, LeaseName: "job", Lease: held(), LeaseExists: true}, CodeStale, 100},
		{"ErrStaleLeaseEnded", FencedWrite{Token: 100, Fence: 50, LastToken: 100, LeaseName: "job", Lease: ended(EndReleased, t0), LeaseExists: true}, CodeStale, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := DecideFencedWrite(tc.w, now)
			if e == nil {
				if tc.code != "" {
					t.Fatalf("DecideFencedWrite() = nil, want %q", tc.code)
				}
				return
			}
			if e.Code != tc.code || e.CurrentFence != tc.fence || e.PresentedToken != tc.w.Token {
				t.Errorf("DecideFencedWrite() = %+v, want %q with fence %d", e, tc.code, tc.fence)
			}
		})
	}
}

func TestState(t *testing.T) {
	st := held().State(t0.Add(12 * time.Second))
	if st.Held || st.End != EndExpired || !st.EndedAt.Equal(t0.Add(10*time.Second)) || !st.AvailableAt.Equal(t0.Add(15*time.Second)) {
		t.Errorf("State() of an unsettled expired grant = %+v, want expired at expiry, available after the lock delay", st)
	}
	st = held().State(t0)
	if !st.Held || !st.AvailableAt.Equal(t0.Add(15*time.Second)) {
		t.Errorf("State() of a held grant = %+v, want held, available at expiry + lock delay", st)
	}
}
