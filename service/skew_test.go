package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// skewed is a replica's store whose clock, the one the replica schedules by (its line's and
// sweeper's timers, Retry-After), is off from the database's. On PostgreSQL the process's own
// wall clock is read nowhere else, so this is a replica whose wall clock is off.
type skewed struct {
	*postgres.Store
	clock lease.Clock
}

func (s skewed) Clock() lease.Clock { return s.clock }

// TestSkewedReplicaCannotGrantHeld: replicas whose clocks are three hours ahead of or behind
// the database's refuse a name held through another replica, with or without waiting, show it
// held, and do not record it expired: the database's clock decides.
func TestSkewedReplicaCannotGrantHeld(t *testing.T) {
	for _, skew := range []time.Duration{3 * time.Hour, -3 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			url := pg.NewDatabase(t)
			ctx := context.Background()
			var hooks [2]service.Hooks
			var urls []string
			for i := range 2 {
				st, err := postgres.Open(ctx, url, postgres.Options{OnCommit: hooks[i].Publish, OnLine: hooks[i].LineChanged})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				var s service.Store = st
				if i == 1 {
					s = skewed{st, lease.NewAnchoredClock(st.Clock().Now().Add(skew), time.Time{}, lease.SinceStart())}
				}
				urls = append(urls, servicetest.Serve(t, s, &hooks[i], service.Config{}).URL)
			}
			held := mustAcquire(t, urls[0], "job", "holder")
			if code, b := post(t, urls[1]+"/v1/leases/job/acquire", `{"holder":"skewed","ttl_ms":60000}`); code != 409 {
				t.Errorf("acquire on the skewed replica = %d %v, want 409", code, b)
			}
			if code, b := post(t, urls[1]+"/v1/leases/job/acquire", `{"holder":"skewed","ttl_ms":60000,"wait_ms":500}`); code != 409 {
				t.Errorf("acquire with wait on the skewed replica = %d %v, want 409", code, b)
			}
			if got := getState(t, urls[1], "job"); got["held"] != true || got["token"] != held["token"] {
				t.Errorf("state on the skewed replica = %v, want held by token %v", got, held["token"])
			}
			if code, b := post(t, urls[0]+"/v1/leases/job/renew", `{"lease_id":"`+held["lease_id"].(string)+`"}`); code != 200 {
				t.Errorf("the holder's renew after the skewed replica's attempts = %d %v, want 200", code, b)
			}
		})
	}
}

// getState reads the state of a lease.
func getState(t *testing.T, url, name string) map[string]any {
	t.Helper()
	resp, err := servicetest.Client().Get(url + "/v1/leases/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]any
	json.NewDecoder(resp.Body).Decode(&st)
	return st
}
