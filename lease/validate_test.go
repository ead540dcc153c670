package lease_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// wantValid fails unless err is nil (want "") or an invalid_request naming field.
func wantValid(t *testing.T, what string, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("%s = %v, want nil", what, err)
		}
		return
	}
	if !lease.IsCode(err, lease.CodeInvalid) {
		t.Fatalf("%s = %v, want code %q", what, err, lease.CodeInvalid)
	}
	le := err.(*lease.Error)
	if len(le.Fields) != 1 || !strings.HasPrefix(le.Fields[0], field+": ") {
		t.Errorf("%s fields = %q, want one naming %q", what, le.Fields, field)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"OK/OneLetter", "a", true},
		{"OK/OneDigit", "7", true},
		{"OK/Upper", "JOB", true},
		{"OK/AllPunctuation", "a.b_c:d-e", true},
		{"OK/TrailingPunctuation", "a-._:", true},
		{"OK/Len200", strings.Repeat("x", 200), true},
		{"ErrInvalid/Empty", "", false},
		{"ErrInvalid/Len201", strings.Repeat("x", 201), false},
		{"ErrInvalid/FirstDot", ".a", false},
		{"ErrInvalid/FirstDash", "-a", false},
		{"ErrInvalid/FirstUnderscore", "_a", false},
		{"ErrInvalid/FirstColon", ":a", false},
		{"ErrInvalid/Slash", "a/b", false},
		{"ErrInvalid/EncodedSlash", "a%2Fb", false},
		{"ErrInvalid/Space", "a b", false},
		{"ErrInvalid/Tilde", "a~", false},
		{"ErrInvalid/Newline", "a\n", false},
		{"ErrInvalid/NUL", "a\x00", false},
		{"ErrInvalid/Unicode", "café", false},
		{"ErrInvalid/UnicodeFirst", "été", false},
		{"ErrInvalid/InvalidUTF8", "a\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field := "name"
			if tt.ok {
				field = ""
			}
			wantValid(t, "ValidateName("+tt.in+")", lease.ValidateName(tt.in), field)
		})
	}
}

func TestValidateHolder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"OK/Len1", "w", true},
		{"OK/Typical", "worker-3@host-a", true},
		{"OK/Len256", strings.Repeat("h", 256), true},
		{"OK/Len256Runes", strings.Repeat("é", 256), true}, // 512 bytes: the limit counts characters
		{"OK/SpacesAndSymbols", "batch job #7 (nightly)", true},
		{"ErrInvalid/Empty", "", false},
		{"ErrInvalid/Len257", strings.Repeat("h", 257), false},
		{"ErrInvalid/Len257Runes", strings.Repeat("é", 257), false},
		{"ErrInvalid/NUL", "a\x00b", false},
		{"ErrInvalid/Newline", "a\nb", false},
		{"ErrInvalid/Tab", "\t", false},
		{"ErrInvalid/DEL", "a\x7f", false},
		{"ErrInvalid/InvalidUTF8", "a\xffb", false},
		{"ErrInvalid/TruncatedUTF8", "caf\xc3", false},
		{"OK/NonLatin", "工作者-3@ホスト", true},
		{"OK/RightToLeftScript", "עובד-3@host", true},
		{"ErrInvalid/C1Control", "a\u0085b", false},
		{"ErrInvalid/ZeroWidthSpace", "alice\u200b", false},
		{"ErrInvalid/ZeroWidthJoiner", "al\u200dice", false},
		{"ErrInvalid/WordJoiner", "al\u2060ice", false},
		{"ErrInvalid/ByteOrderMark", "\ufeffalice", false},
		{"ErrInvalid/RightToLeftOverride", "\u202etsoh-live", false},
		{"ErrInvalid/RightToLeftIsolate", "a\u2067b\u2069", false},
		{"ErrInvalid/RightToLeftMark", "a\u200fb", false},
		{"ErrInvalid/ArabicLetterMark", "a\u061cb", false},
		{"ErrInvalid/SoftHyphen", "al\u00adice", false},
		{"ErrInvalid/Tag", "a\U000e0041", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field := "holder"
			if tt.ok {
				field = ""
			}
			wantValid(t, "ValidateHolder("+tt.in+")", lease.ValidateHolder(tt.in), field)
		})
	}
}

func TestLimits(t *testing.T) {
	l := lease.DefaultLimits()
	if l.MinTTL != time.Second || l.MaxTTL != time.Hour {
		t.Fatalf("DefaultLimits() ttl = [%v, %v], want [1s, 1h]", l.MinTTL, l.MaxTTL)
	}
	tests := []struct {
		name  string
		check func(time.Duration) error
		field string
		in    time.Duration
		ok    bool
	}{
		{"TTL/ErrBelowMin", l.ValidateTTL, "ttl_ms", 999 * time.Millisecond, false},
		{"TTL/ErrZero", l.ValidateTTL, "ttl_ms", 0, false},
		{"TTL/ErrNegative", l.ValidateTTL, "ttl_ms", -time.Second, false},
		{"TTL/OKMin", l.ValidateTTL, "ttl_ms", time.Second, true},
		{"TTL/OKMax", l.ValidateTTL, "ttl_ms", time.Hour, true},
		{"TTL/ErrAboveMax", l.ValidateTTL, "ttl_ms", time.Hour + time.Millisecond, false},
		{"Wait/ErrNegative", l.ValidateWait, "wait_ms", -time.Millisecond, false},
		{"Wait/OKZero", l.ValidateWait, "wait_ms", 0, true},
		{"Wait/OKMax", l.ValidateWait, "wait_ms", l.MaxWait, true},
		{"Wait/ErrAboveMax", l.ValidateWait, "wait_ms", l.MaxWait + time.Millisecond, false},
		{"LockDelay/ErrNegative", l.ValidateLockDelay, "lock_delay_ms", -time.Millisecond, false},
		{"LockDelay/OKZero", l.ValidateLockDelay, "lock_delay_ms", 0, true},
		{"LockDelay/OKMax", l.ValidateLockDelay, "lock_delay_ms", l.MaxLockDelay, true},
		{"LockDelay/ErrAboveMax", l.ValidateLockDelay, "lock_delay_ms", l.MaxLockDelay + time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field := tt.field
			if tt.ok {
				field = ""
			}
			wantValid(t, tt.name+"("+tt.in.String()+")", tt.check(tt.in), field)
		})
	}
	t.Run("CustomBounds", func(t *testing.T) {
		c := lease.Limits{MinTTL: 10 * time.Millisecond, MaxTTL: 20 * time.Millisecond}
		wantValid(t, "ValidateTTL(10ms)", c.ValidateTTL(10*time.Millisecond), "")
		wantValid(t, "ValidateTTL(1s)", c.ValidateTTL(time.Second), "ttl_ms")
		wantValid(t, "ValidateWait(1ms) with MaxWait 0", c.ValidateWait(time.Millisecond), "wait_ms")
	})
}

func TestNormalizeMetadata(t *testing.T) {
	// A member whose compacted object is exactly n bytes: {"k":"xxx…"} is 8 bytes + the x's.
	sized := func(n int) string { return `{"k":"` + strings.Repeat("x", n-8) + `"}` }
	tests := []struct {
		name string
		in   string
		want string // compacted; "" for none
		ok   bool
	}{
		{"OK/Empty", "", "", true},
		{"OK/Blank", " \n\t", "", true},
		{"OK/Null", "null", "", true},
		{"OK/NullWithSpace", "  null\n", "", true},
		{"OK/EmptyObject", "{}", "{}", true},
		{"OK/Compacted", "{ \"addr\" : \"10.0.0.7:9000\",\n \"n\": [1, 2] }", `{"addr":"10.0.0.7:9000","n":[1,2]}`, true},
		{"OK/Nested", `{"a":{"b":{"c":null}}}`, `{"a":{"b":{"c":null}}}`, true},
		{"OK/Exactly4KiB", sized(4096), sized(4096), true},
		{"OK/4KiBOnlyAfterCompaction", "{ \"k\" :    \"" + strings.Repeat("x", 4088) + "\"   }", sized(4096), true},
		{"ErrInvalid/Over4KiB", sized(4097), "", false},
		{"ErrInvalid/Array", "[1,2]", "", false},
		{"ErrInvalid/String", `"s"`, "", false},
		{"ErrInvalid/Number", "1", "", false},
		{"ErrInvalid/Bool", "true", "", false},
		{"ErrInvalid/Truncated", `{"a":`, "", false},
		{"ErrInvalid/TrailingGarbage", `{"a":1}x`, "", false},
		{"ErrInvalid/TwoObjects", `{}{}`, "", false},
		{"ErrInvalid/SingleQuotes", `{'a':1}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lease.NormalizeMetadata(json.RawMessage(tt.in))
			if !tt.ok {
				wantValid(t, "NormalizeMetadata("+tt.name+")", err, "metadata")
				if got != nil {
					t.Errorf("NormalizeMetadata(%s) = %q with an error, want nil", tt.name, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("NormalizeMetadata(%.40q) = %.60q, %v; want %.60q", tt.in, got, err, tt.want)
			}
			if tt.want == "" && got != nil {
				t.Errorf("NormalizeMetadata(%q) = %q, want nil for no metadata", tt.in, got)
			}
		})
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		name string
		ms   int64
		want time.Duration
		ok   bool
	}{
		{"OKZero", 0, 0, true},
		{"OK", 1500, 1500 * time.Millisecond, true},
		{"OKLargest", 1 << 40, (1 << 40) * time.Millisecond, true},
		{"ErrNegative", -1, 0, false},
		{"ErrWrapsAround", -288230376151701744, 0, false},
		{"ErrTooLarge", 288230376151741744, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lease.Millis("ttl_ms", tc.ms)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("Millis(%d) = %v, %v; want %v, ok %v", tc.ms, got, err, tc.want, tc.ok)
			}
			if !tc.ok && !lease.IsCode(err, lease.CodeInvalid) {
				t.Errorf("Millis(%d) error code = %q, want invalid_request", tc.ms, lease.ErrorCode(err))
			}
		})
	}
}
