package lease_test

import (
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestNextToken(t *testing.T) {
	// 2^53 µs after the epoch is in 2255; a clock past it cannot issue a token.
	late := time.UnixMicro(lease.MaxToken + 1)
	tests := []struct {
		name    string
		last    int64
		now     time.Time
		want    int64
		wantErr bool
	}{
		{"OK/FirstIsClock", 0, t0, t0.UnixMicro(), false},
		{"OK/ClockAhead", t0.UnixMicro() - 5, t0, t0.UnixMicro(), false},
		{"OK/ClockEqualLast", t0.UnixMicro(), t0, t0.UnixMicro() + 1, false},
		{"OK/ClockBehind", t0.UnixMicro() + 1000, t0, t0.UnixMicro() + 1001, false},
		{"OK/ClockBeforeEpoch", 0, time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 1, false},
		{"OK/LastBelowMax", lease.MaxToken - 1, t0, lease.MaxToken, false},
		{"OK/ClockAtMax", 0, time.UnixMicro(lease.MaxToken), lease.MaxToken, false},
		{"ErrRange/LastAtMax", lease.MaxToken, t0, 0, true},
		{"ErrRange/ClockPastMax", 0, late, 0, true},
		{"ErrRange/ClockFarFuture", 0, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lease.NextToken(tt.last, tt.now)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("NextToken(%d, %v) = %d, %v; want %d (error %v)", tt.last, tt.now, got, err, tt.want, tt.wantErr)
			}
			if err == nil && !lease.ValidToken(got) {
				t.Errorf("NextToken(%d, %v) = %d, not a valid token", tt.last, tt.now, got)
			}
		})
	}
}

// TestNextTokenClockJumps drives the token rule with a clock that steps backwards and forwards
// by large and tiny amounts: every token must exceed the one before, and track the clock when
// the clock is ahead.
func TestNextTokenClockJumps(t *testing.T) {
	clock := lease.NewFakeClock(t0)
	steps := []time.Duration{0, 0, time.Microsecond, -time.Hour, -24 * time.Hour, 48 * time.Hour, -time.Microsecond,
		time.Nanosecond, 0, -365 * 24 * time.Hour, 10 * 365 * 24 * time.Hour, -time.Second, time.Millisecond}
	var last int64
	for i, step := range steps {
		clock.Advance(step)
		now := clock.Now()
		tok, err := lease.NextToken(last, now)
		if err != nil {
			t.Fatalf("step %d (%v): NextToken(%d, %v) = %v", i, step, last, now, err)
		}
		if tok <= last {
			t.Fatalf("step %d (%v): token %d, want > %d", i, step, tok, last)
		}
		if want := max(last+1, now.UnixMicro()); tok != want {
			t.Errorf("step %d (%v): token %d, want max(last+1, now µs) = %d", i, step, tok, want)
		}
		last = tok
	}
}

func TestValidToken(t *testing.T) {
	for _, tt := range []struct {
		tok  int64
		want bool
	}{{-1, false}, {0, false}, {1, true}, {t0.UnixMicro(), true}, {lease.MaxToken, true}, {lease.MaxToken + 1, false}, {1<<63 - 1, false}} {
		if got := lease.ValidToken(tt.tok); got != tt.want {
			t.Errorf("ValidToken(%d) = %v, want %v", tt.tok, got, tt.want)
		}
	}
	if lease.MaxToken != 9007199254740991 {
		t.Errorf("MaxToken = %d, want 2^53-1", lease.MaxToken)
	}
}

func TestValidatePresentedToken(t *testing.T) {
	for _, tt := range []struct {
		tok  int64
		want bool
	}{{-1, false}, {0, true}, {1, true}, {lease.MaxToken, true}, {lease.MaxToken + 1, false}, {-1 << 63, false}} {
		err := lease.ValidatePresentedToken(tt.tok)
		if ok := err == nil; ok != tt.want || !ok && !lease.IsCode(err, lease.CodeInvalid) {
			t.Errorf("ValidatePresentedToken(%d) = %v, want ok %v (else %s)", tt.tok, err, tt.want, lease.CodeInvalid)
		}
	}
}
