package lease

import (
	"testing"
	"time"
)

// reader is a shared grant of slot "job#i" taken at t0 for 10 s with a lock delay of 5 s.
func reader(holder string, token int64) Grant {
	return NewGrant("job#0", holder, token, 10*time.Second, 5*time.Second, t0)
}

func TestDecideMode(t *testing.T) {
	last := t0.UnixMicro() + 1000
	expired := reader("r-old", 90)
	expired.End, expired.EndedAt = EndExpired, t0.Add(10*time.Second)
	released := reader("r-gone", 91)
	released.End, released.EndedAt = EndReleased, t0.Add(time.Second)
	for _, tc := range []struct {
		name string
		h    Holders
		mode Mode
		now  time.Time
		slot int
		code Code
	}{
		{"OKExclusiveNeverUsed", Holders{Name: "job"}, ModeExclusive, t0, -1, ""},
		{"OKSharedNeverUsed", Holders{Name: "job"}, ModeShared, t0, 0, ""},
		{"OKSharedBesideShared", Holders{Name: "job", Shared: []Grant{reader("r0", 100)}, SharedExists: []bool{true}}, ModeShared, t0.Add(time.Second), 1, ""},
		{"ErrHeldExclusiveBesideShared", Holders{Name: "job", Shared: []Grant{reader("r0", 100)}, SharedExists: []bool{true}}, ModeExclusive, t0.Add(time.Second), -1, CodeHeld},
		{"ErrHeldSharedBesideExclusive", Holders{Name: "job", Excl: held(), ExclExists: true}, ModeShared, t0.Add(time.Second), -1, CodeHeld},
		{"ErrHeldExclusiveBesideExclusive", Holders{Name: "job", Excl: held(), ExclExists: true}, ModeExclusive, t0.Add(time.Second), -1, CodeHeld},
		{"ErrHeldExclusiveInSharedLockDelay", Holders{Name: "job", Shared: []Grant{expired}, SharedExists: []bool{true}}, ModeExclusive, t0.Add(14 * time.Second), -1, CodeHeld},
		{"OKExclusiveAfterSharedLockDelay", Holders{Name: "job", Shared: []Grant{expired}, SharedExists: []bool{true}}, ModeExclusive, t0.Add(15 * time.Second), -1, ""},
		{"OKSharedSkipsSlotInLockDelay", Holders{Name: "job", Shared: []Grant{expired}, SharedExists: []bool{true}}, ModeShared, t0.Add(14 * time.Second), 1, ""},
		{"OKSharedReusesFreedSlot", Holders{Name: "job", Shared: []Grant{reader("r0", 100), released}, SharedExists: []bool{true, true}}, ModeShared, t0.Add(2 * time.Second), 1, ""},
		{"OKExclusiveAfterSharedReleased", Holders{Name: "job", Shared: []Grant{released}, SharedExists: []bool{true}}, ModeExclusive, t0.Add(2 * time.Second), -1, ""},
		{"ErrHeldSharedInExclusiveLockDelay", Holders{Name: "job", Excl: ended(EndExpired, t0.Add(10*time.Second)), ExclExists: true}, ModeShared, t0.Add(12 * time.Second), -1, CodeHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slot, token, err := DecideMode(tc.h, tc.mode, tc.now, last)
			if ErrorCode(err) != tc.code {
				t.Fatalf("DecideMode() = %v, want code %q", err, tc.code)
			}
			if err == nil && (slot != tc.slot || token <= last) {
				t.Errorf("DecideMode() = slot %d token %d, want slot %d and a token above %d", slot, token, tc.slot, last)
			}
		})
	}
}

// TestDecideModeFull: a name has at most MaxShared shared grants at once.
func TestDecideModeFull(t *testing.T) {
	h := Holders{Name: "job"}
	for i := range MaxShared {
		h.Shared = append(h.Shared, reader("r", int64(100+i)))
		h.SharedExists = append(h.SharedExists, true)
	}
	_, _, err := DecideMode(h, ModeShared, t0.Add(time.Second), t0.UnixMicro())
	if e, ok := err.(*Error); !ok || e.Code != CodeHeld || e.Holder != "r" {
		t.Errorf("DecideMode(%d shared held) = %v, want lease_held naming a holder", MaxShared, err)
	}
}

// TestDecideModeHeldSaysWhenFree: an exclusive acquire refused by shared grants learns when the
// last of them lets the name go.
func TestDecideModeHeldSaysWhenFree(t *testing.T) {
	late := NewGrant("job#1", "r1", 101, 30*time.Second, 0, t0)
	h := Holders{Name: "job", Shared: []Grant{reader("r0", 100), late}, SharedExists: []bool{true, true}}
	_, _, err := DecideMode(h, ModeExclusive, t0.Add(time.Second), t0.UnixMicro())
	e, ok := err.(*Error)
	if !ok || e.Holder != "r0" || !e.AvailableAt.Equal(t0.Add(30*time.Second)) {
		t.Errorf("DecideMode() = %v, want held by r0 until %v", err, t0.Add(30*time.Second))
	}
}

func TestValidateMode(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		limit int
		want  Mode
		code  Code
	}{
		{"", 0, ModeExclusive, ""},
		{"", 3, ModeExclusive, ""},
		{"shared", 0, ModeShared, ""},
		{"exclusive", 0, ModeExclusive, ""},
		{"shared", 2, "", CodeInvalid},
		{"exclusive", 2, "", CodeInvalid},
		{"read", 0, "", CodeInvalid},
	} {
		got, err := ValidateMode(tc.mode, tc.limit)
		if got != tc.want || ErrorCode(err) != tc.code {
			t.Errorf("ValidateMode(%q, %d) = %q, %v; want %q, code %q", tc.mode, tc.limit, got, err, tc.want, tc.code)
		}
	}
}

// TestFencedWriteShared: a shared grant's token never writes, whatever the fence or lease.
func TestFencedWriteShared(t *testing.T) {
	w := FencedWrite{Resource: "db", Token: 100, Fence: 50, LastToken: 200, Shared: true}
	if e := DecideFencedWrite(w, t0); e == nil || e.Code != CodeSharedToken || e.PresentedToken != 100 || e.CurrentFence != 50 {
		t.Errorf("DecideFencedWrite(shared token) = %v, want shared_token with the token and fence", e)
	}
	w.Shared = false
	if e := DecideFencedWrite(w, t0); e != nil {
		t.Errorf("DecideFencedWrite(exclusive token) = %v, want it applied", e)
	}
}

func TestSumShared(t *testing.T) {
	r0 := reader("r0", 100).State(t0.Add(time.Second))
	gone := reader("r1", 101)
	gone.End, gone.EndedAt = EndReleased, t0.Add(time.Second)
	r1 := gone.State(t0.Add(2 * time.Second))
	st := State{Name: "job", Slots: []State{r0, r1}}
	SumShared(&st)
	if !st.Held || st.Mode != ModeShared || len(st.Holders) != 1 || st.Holder != "r0" || st.Token != 101 {
		t.Errorf("SumShared(r0 held, r1 released) = %+v, want held by r0 alone, token 101", st)
	}
	st = State{Name: "job", Slots: []State{r1}}
	SumShared(&st)
	if st.Held || st.Holder != "r1" || st.End != EndReleased {
		t.Errorf("SumShared(r1 released) = %+v, want free, last held by r1, released", st)
	}
}

// TestNameState: a name reads as its own grant until it is used with slots after it, then as
// its slots summed up; a name never used is not found.
func TestNameState(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	own := State{Name: "n", Held: true, Holder: "plain", Token: 10, ExpiresAt: t0.Add(time.Minute)}
	slot := func(token int64) State {
		return State{Name: SlotName("n", 0), Held: true, Holder: "slot", Token: token, ExpiresAt: t0.Add(time.Minute)}
	}
	for _, tc := range []struct {
		name      string
		ownExists bool
		slots     *Slotted
		want      string // "plain", "semaphore", "shared" or an error code
	}{
		{"OwnOnly", true, nil, "plain"},
		{"OwnAfterSlots", true, &Slotted{Limit: 2, Slots: []State{slot(5)}}, "plain"},
		{"SemaphoreAfterOwn", true, &Slotted{Limit: 2, Slots: []State{slot(20)}}, "semaphore"},
		{"SharedAfterOwn", true, &Slotted{Limit: 1, Shared: true, Slots: []State{slot(20)}}, "shared"},
		{"SlotsOnly", false, &Slotted{Limit: 2, Slots: []State{slot(5)}}, "semaphore"},
		{"ErrNeverUsed", false, nil, string(CodeNotFound)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := NameState("n", own, tc.ownExists, tc.slots)
			got := "plain"
			switch {
			case err != nil:
				got = string(err.(*Error).Code)
			case st.Mode == ModeShared:
				got = "shared"
			case st.Limit > 0:
				got = "semaphore"
			}
			if got != tc.want {
				t.Errorf("NameState = %+v, %v: reads as %s, want %s", st, err, got, tc.want)
			}
		})
	}
}

// TestHandedFirst: the oldest waiter of the holder named goes first, never one waiting for
// several names; none named, or none of it waiting, leaves the line as it is.
func TestHandedFirst(t *testing.T) {
	line := []Waiter{{Holder: "a"}, {Holder: "b", Multi: true}, {Holder: "b"}, {Holder: "b"}}
	for _, tc := range []struct {
		to   string
		want int
	}{{"", -1}, {"a", 0}, {"b", 2}, {"c", -1}} {
		if got := HandedFirst(line, tc.to); got != tc.want {
			t.Errorf("HandedFirst(line, %q) = %d, want %d", tc.to, got, tc.want)
		}
	}
}
