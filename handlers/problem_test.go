package handlers

import (
	"testing"

	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/wire"
)

// TestCanceledIsTheMetricsOutcome: a request whose client left is logged under the code the
// metrics count it by.
func TestCanceledIsTheMetricsOutcome(t *testing.T) {
	if string(wire.CodeCanceled) != metrics.Canceled {
		t.Errorf("wire.CodeCanceled = %q, metrics.Canceled = %q: one outcome, two names", wire.CodeCanceled, metrics.Canceled)
	}
}
