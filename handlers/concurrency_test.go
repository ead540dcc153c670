package handlers_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// TestContention: dozens of clients contend on a few names through the generated client while
// the server clock moves. Every answer is one the contract allows, and afterwards each name's
// history has strictly increasing tokens and no grant starting before the previous one ended.
func TestContention(t *testing.T) {
	e := newEnv(t)
	names := []string{"x", "y", "z"}
	const clients, rounds = 32, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := map[string][]int64{}
	for g := range clients {
		wg.Go(func() {
			for i := range rounds {
				name := names[(g+i)%len(names)]
				r, err := e.c.AcquireLeaseWithResponse(e.ctx, name, nil, api.AcquireRequest{Holder: fmt.Sprintf("c%d", g), TtlMs: 1000})
				if err != nil {
					t.Errorf("AcquireLease(%q) = %v", name, err)
					return
				}
				switch r.StatusCode() {
				case http.StatusConflict:
					e.clock.Advance(100 * time.Millisecond)
					continue
				case http.StatusOK:
				default:
					t.Errorf("AcquireLease(%q) = %s %s, want 200 or 409", name, r.Status(), r.Body)
					return
				}
				l := r.JSON200
				mu.Lock()
				granted[name] = append(granted[name], l.Token)
				mu.Unlock()
				switch i % 3 {
				case 0:
					rr, err := e.c.ReleaseLeaseWithResponse(e.ctx, name, api.ReleaseRequest{LeaseId: *l.LeaseId})
					if err != nil || (rr.StatusCode() != http.StatusNoContent && rr.StatusCode() != http.StatusConflict) {
						t.Errorf("ReleaseLease(%q) = %v, %v; want 204 or 409", name, status(rr), err)
					}
				case 1:
					rn, err := e.c.RenewLeaseWithResponse(e.ctx, name, api.RenewRequest{LeaseId: *l.LeaseId})
					if err != nil || (rn.StatusCode() != http.StatusOK && rn.StatusCode() != http.StatusConflict) {
						t.Errorf("RenewLease(%q) = %v, %v; want 200 or 409", name, status(rn), err)
					} else if rn.JSON200 != nil && rn.JSON200.Token != l.Token {
						t.Errorf("RenewLease(%q) token %d, want %d", name, rn.JSON200.Token, l.Token)
					}
				}
			}
		})
	}
	wg.Wait()
	e.clock.Advance(time.Hour)
	if _, _, err := e.store.ExpireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range names {
		var evs []lease.Event
		acquired := map[int64]bool{}
		for _, x := range e.events(n) {
			evs = append(evs, lease.Event{Seq: x.Seq, Type: lease.EventType(x.Type), Name: x.Name, Token: x.Token, Holder: x.Holder, At: x.At.Time})
			if x.Type == api.EventTypeAcquired {
				acquired[x.Token] = true
			}
		}
		if err := storetest.CheckHistory(evs); err != nil {
			t.Errorf("history of %q: %v", n, err)
		}
		for _, tok := range granted[n] {
			if !acquired[tok] {
				t.Errorf("grant %d of %q answered 200 but is not in the history", tok, n)
			}
		}
		if len(acquired) != len(granted[n]) {
			t.Errorf("%q: %d acquired events, %d grants answered", n, len(acquired), len(granted[n]))
		}
		total += len(granted[n])
	}
	if total < len(names) {
		t.Errorf("only %d grants in all: the test did not contend", total)
	}
}
