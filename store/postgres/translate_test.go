package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasekeeper/leasekeeper/lease"
)

func TestTranslate(t *testing.T) {
	cases := []struct {
		code      string
		retry     bool
		wantCode  lease.Code
		wantChain bool
	}{
		{"40001", true, lease.CodeUnavailable, true},  // serialization failure
		{"40P01", true, lease.CodeUnavailable, true},  // deadlock
		{"08006", false, lease.CodeUnavailable, true}, // connection failure
		{"57P01", false, lease.CodeUnavailable, true}, // admin shutdown
		{"53300", false, lease.CodeUnavailable, true}, // too many connections
		{"25006", false, lease.CodeUnavailable, true}, // read-only (a standby)
		{"22021", false, lease.CodeInvalid, true},     // text not UTF-8: the request's fault
		{"23505", false, lease.CodeInternal, true},    // unique violation: a bug, internal
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			pe := &pgconn.PgError{Code: c.code}
			err := fmt.Errorf("op: %w", pe)
			if got := retryable(err); got != c.retry {
				t.Errorf("retryable(%s) = %v, want %v", c.code, got, c.retry)
			}
			got := translate(err)
			if lease.ErrorCode(got) != c.wantCode {
				t.Errorf("translate(%s) = %v (code %q), want code %q", c.code, got, lease.ErrorCode(got), c.wantCode)
			}
			if !errors.Is(got, pe) {
				t.Errorf("translate(%s) lost the driver's error from the chain", c.code)
			}
		})
	}
	if err := translate(lease.Errorf(lease.CodeHeld, "held")); lease.ErrorCode(err) != lease.CodeHeld {
		t.Errorf("translate(domain) = %v, want it unchanged", err)
	}
	// A connection the driver closed after the server went away (between a commit and its
	// flush, in TestDatabasePowerLoss).
	if err := translate(fmt.Errorf("flush the commit: %w", pgconn.ErrConnClosed)); lease.ErrorCode(err) != lease.CodeUnavailable {
		t.Errorf("translate(conn closed) = %v, want unavailable", err)
	}
}
