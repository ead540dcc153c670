package lease_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

func TestValidateNames(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("n%d", i)
		}
		return out
	}
	tests := []struct {
		name  string
		in    []string
		field string
	}{
		{"OK/One", []string{"a"}, ""},
		{"OK/Most", many(lease.MaxNames), ""},
		{"ErrEmpty", nil, "names"},
		{"ErrTooMany", many(lease.MaxNames + 1), "names"},
		{"ErrDuplicate", []string{"a", "b", "a"}, "names"},
		{"ErrInvalidName", []string{"a", "b/c"}, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValid(t, fmt.Sprintf("ValidateNames(%d names)", len(tt.in)), lease.ValidateNames(tt.in), tt.field)
		})
	}
}

// TestHeldAll: the refusal of a set names every held name, the first's holder, and is
// available when the last of them is.
func TestHeldAll(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := lease.NewGrant("b", "hb", 1, 10*time.Second, 0, t0)
	d := lease.NewGrant("d", "hd", 2, 30*time.Second, 0, t0)
	var refusals []*lease.Error
	for _, g := range []lease.Grant{b, d} {
		_, err := lease.DecideAcquire(g, true, t0, 2)
		refusals = append(refusals, err.(*lease.Error))
	}
	e := lease.HeldAll(4, []string{"b", "d"}, refusals)
	if e.Code != lease.CodeHeld || !slices.Equal(e.Held, []string{"b", "d"}) || e.Holder != "hb" ||
		!e.ExpiresAt.Equal(b.ExpiresAt) || !e.AvailableAt.Equal(d.ExpiresAt) {
		t.Errorf("HeldAll() = %+v; want lease_held, Held [b d], holder hb, expires %v, available %v", e, b.ExpiresAt, d.ExpiresAt)
	}
}
