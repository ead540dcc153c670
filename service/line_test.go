package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// pgReplicas serves n replicas over one new PostgreSQL database, as `serve --db postgres://…`
// wires them, and returns their URLs.
func pgReplicas(t *testing.T, n int) []string {
	t.Helper()
	url := pg.NewDatabase(t)
	var urls []string
	for range n {
		var hooks service.Hooks
		st, err := postgres.Open(context.Background(), url, postgres.Options{OnCommit: hooks.Publish, OnLine: hooks.LineChanged})
		if err != nil {
			t.Fatalf("postgres.Open() = %v", err)
		}
		t.Cleanup(func() { st.Close() })
		urls = append(urls, servicetest.Serve(t, st, &hooks, service.Config{}).URL)
	}
	return urls
}

// TestLineAcrossReplicas: three waiters, each on its own replica, join the line of one name in
// turn; each release, made through yet another replica, grants the name to the next of them in
// the order they joined, and a request that does not wait is refused while they wait, on any
// replica.
func TestLineAcrossReplicas(t *testing.T) {
	urls := pgReplicas(t, 3)
	first := mustAcquire(t, urls[0], "job", "first")
	granted := make(chan answer, 3)
	// The waiters join on replicas 2, 1, 0: the order of the line is not the replicas'.
	for i := range 3 {
		go func() {
			c, b := post(t, urls[2-i]+"/v1/leases/job/acquire", fmt.Sprintf(`{"holder":"w%d","ttl_ms":60000,"wait_ms":30000}`, i))
			granted <- answer{c, b}
		}()
		// Every replica counts the same line.
		waitWaiters(t, urls[i], "job", float64(i+1))
	}
	for _, u := range urls {
		if code, b := post(t, u+"/v1/leases/job/acquire", `{"holder":"barger","ttl_ms":60000}`); code != 409 {
			t.Errorf("acquire without waiting on %s while three wait = %d %v, want 409", u, code, b)
		}
	}
	prev := first
	for i := range 3 {
		// Released through a replica other than the one its holder got it from.
		if code, b := post(t, urls[(i+1)%3]+"/v1/leases/job/release", fmt.Sprintf(`{"lease_id":%q}`, prev["lease_id"])); code != 204 {
			t.Fatalf("release of %v = %d %v", prev["holder"], code, b)
		}
		at := time.Now()
		r := testwait.Receive(t, granted, 10*time.Second)
		t.Logf("grant %d %v after the release", i, time.Since(at))
		if r.code != 200 || r.body["holder"] != fmt.Sprintf("w%d", i) {
			t.Fatalf("grant %d = %d %v; want w%d (first come first served across replicas)", i, r.code, r.body, i)
		}
		if r.body["token"].(float64) <= prev["token"].(float64) {
			t.Errorf("token %v after %v, want larger", r.body["token"], prev["token"])
		}
		prev = r.body
	}
	waitWaiters(t, urls[0], "job", 0)
}
