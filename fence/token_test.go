package fence_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/fence"
)

func TestParseToken(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"OK/Zero", "0", 0, true},
		{"OK/Small", "42", 42, true},
		{"OK/LeadingZeros", "007", 7, true},
		{"OK/Max", "9007199254740991", fence.MaxToken, true},
		{"ErrEmpty", "", 0, false},
		{"ErrTwoPow53", "9007199254740992", 0, false},
		{"ErrOverflowInt64", "9223372036854775808", 0, false},
		{"ErrNegative", "-1", 0, false},
		{"ErrNegativeZero", "-0", 0, false},
		{"ErrPlus", "+1", 0, false},
		{"ErrSpace", " 1", 0, false},
		{"ErrTrailing", "1 ", 0, false},
		{"ErrUnderscore", "1_000", 0, false},
		{"ErrHex", "0x1", 0, false},
		{"ErrFullwidthDigit", "１", 0, false},
		{"ErrList", "1,2", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fence.ParseToken(tt.in)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("ParseToken(%q) = %d, %v, want %d, nil", tt.in, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("ParseToken(%q) = %d, %v, want ErrInvalidToken", tt.in, got, err)
			}
		})
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"0", "1", "007", "9007199254740991", "9007199254740992", "-1", "+1", "", " 1", "1e3", "0x10", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := fence.ParseToken(s)
		// Reference: a non-empty run of ASCII digits whose value is at most MaxToken.
		digits := s != "" && strings.Trim(s, "0123456789") == ""
		ref, refErr := strconv.ParseInt(s, 10, 64)
		wantOK := digits && refErr == nil && ref <= fence.MaxToken
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("ParseToken(%q) error %v does not wrap ErrInvalidToken", s, err)
			}
			if wantOK {
				t.Fatalf("ParseToken(%q) = %v, want %d", s, err, ref)
			}
			return
		}
		if !wantOK {
			t.Fatalf("ParseToken(%q) = %d, nil, want an error", s, got)
		}
		if got != ref || got < 0 || got > fence.MaxToken {
			t.Fatalf("ParseToken(%q) = %d, want %d", s, got, ref)
		}
		if trimmed := strings.TrimLeft(s, "0"); strconv.FormatInt(got, 10) != trimmed && !(got == 0 && trimmed == "") {
			t.Fatalf("ParseToken(%q) = %d does not round-trip", s, got)
		}
	})
}

func TestStaleTokenError(t *testing.T) {
	var err error = &fence.StaleTokenError{Resource: "k", PresentedToken: 1, CurrentFence: 2}
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("errors.Is(%v, ErrStaleToken) = false, want true", err)
	}
	if !errors.Is(err, fence.ErrStale) { // the deprecated name keeps matching
		t.Errorf("errors.Is(%v, ErrStale) = false, want true", err)
	}
	wrapped := errors.Join(errors.New("context"), err)
	if se, ok := errors.AsType[*fence.StaleTokenError](wrapped); !ok || se.CurrentFence != 2 {
		t.Errorf("errors.AsType through wrapping = %v, %v, want the error", se, ok)
	}
	if errors.Is(err, fence.ErrNoRow) {
		t.Errorf("errors.Is(%v, ErrNoRow) = true, want false", err)
	}
	if got, want := err.Error(), `fence "k": stale token 1, current fence is 2`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	detailed := &fence.StaleTokenError{Resource: "r", PresentedToken: 1, CurrentFence: 2, Detail: "below the fence"}
	if got, want := detailed.Error(), `fence "r": stale token 1, current fence is 2: below the fence`; got != want {
		t.Errorf("Error() with a detail = %q, want %q", got, want)
	}
}

func TestTokenContext(t *testing.T) {
	if tok, ok := fence.TokenFromContext(context.Background()); ok {
		t.Errorf("TokenFromContext(empty) = %d, true, want false", tok)
	}
	ctx := fence.ContextWithToken(context.Background(), 12)
	if tok, ok := fence.TokenFromContext(ctx); !ok || tok != 12 {
		t.Errorf("TokenFromContext = %d, %v, want 12, true", tok, ok)
	}
}
