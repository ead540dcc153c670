// Package testwait holds the bounded waits of the tests: every receive from a channel in a
// test has a time limit, so that a broken mechanism fails the test instead of hanging it.
package testwait

import (
	"testing"
	"time"
)

// Receive takes one value from ch (the zero value once ch is closed), failing the test if
// nothing comes within d.
func Receive[T any](t testing.TB, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("nothing received in %v", d)
		panic("unreachable")
	}
}
