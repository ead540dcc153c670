package service_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// pgReplicas serves n replicas over one new PostgreSQL database, as `serve --db postgres://…`
// wires them, and returns their URLs.
func pgReplicas(t *testing.T, n int) []string {
	t.Helper()
	return pgReplicasOn(t, pg.NewDatabase(t), n)
}

// pgReplicasOn serves n replicas over the database at url and returns their URLs.
func pgReplicasOn(t *testing.T, url string, n int) []string {
	t.Helper()
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

// TestWaiterRejoinsAfterLostSession: a replica whose database sessions are cut for a moment
// (as in a database restart) is taken for dead meanwhile, and its waiter is removed from the
// line; the name goes to another request. The waiter is not failed: it joins the line again
// and is granted the name when it is released.
func TestWaiterRejoinsAfterLostSession(t *testing.T) {
	url := pg.NewDatabase(t)
	urls := pgReplicasOn(t, url, 2)
	held := mustAcquire(t, urls[0], "job", "holder")
	waited := make(chan answer, 1)
	go func() {
		c, b := post(t, urls[1]+"/v1/leases/job/acquire", `{"holder":"waiter","ttl_ms":60000,"wait_ms":20000}`)
		waited <- answer{c, b}
	}()
	waitWaiters(t, urls[0], "job", 1)

	// Cut every replica's listening session, which holds its presence lock.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = 1280005968 AND objsubid = 2 AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	waitWaiters(t, urls[0], "job", 0) // the waiter looks dead
	if code, b := post(t, urls[0]+"/v1/leases/job/release", `{"lease_id":"`+held["lease_id"].(string)+`"}`); code != 204 {
		t.Fatalf("release = %d %v", code, b)
	}
	barger := mustAcquire(t, urls[0], "job", "barger") // removes the waiter from the line
	select {
	case r := <-waited:
		t.Fatalf("the waiter answered %d %v while the name was held, want it waiting still", r.code, r.body)
	case <-time.After(1500 * time.Millisecond): // its replica reconnects within a second
	}
	if code, b := post(t, urls[0]+"/v1/leases/job/release", `{"lease_id":"`+barger["lease_id"].(string)+`"}`); code != 204 {
		t.Fatalf("release = %d %v", code, b)
	}
	r := testwait.Receive(t, waited, 10*time.Second)
	if r.code != 200 || r.body["holder"] != "waiter" {
		t.Errorf("the waiter whose place was lost = %d %v, want granted after the release", r.code, r.body)
	}
}

// TestHandoverAcrossReplicas: w0 waits on replica 0, then "next" on replica 2; a handover
// request naming "next" is made through replica 1 and the holder releases through replica 1:
// "next", on another replica than the oldest waiter, is granted first, then w0. A request that
// does not wait is refused meanwhile.
func TestHandoverAcrossReplicas(t *testing.T) {
	urls := pgReplicas(t, 3)
	held := mustAcquire(t, urls[0], "job", "holder")
	granted := make(chan answer, 2)
	for i, w := range []struct{ url, holder string }{{urls[0], "w0"}, {urls[2], "next"}} {
		go func() {
			c, b := post(t, w.url+"/v1/leases/job/acquire", fmt.Sprintf(`{"holder":%q,"ttl_ms":60000,"wait_ms":30000}`, w.holder))
			granted <- answer{c, b}
		}()
		waitWaiters(t, urls[1], "job", float64(i+1))
	}
	if code, b := post(t, urls[1]+"/v1/leases/job/handover", `{"to":"next","reason":"deploy"}`); code/100 != 2 {
		t.Fatalf("handover to next = %d %v", code, b)
	}
	if code, b := post(t, urls[1]+"/v1/leases/job/release", fmt.Sprintf(`{"lease_id":%q}`, held["lease_id"])); code != 204 {
		t.Fatalf("release = %d %v", code, b)
	}
	r := testwait.Receive(t, granted, 10*time.Second)
	if r.code != 200 || r.body["holder"] != "next" {
		t.Fatalf("first grant after the handover = %d %v; want next, the holder it named, on another replica", r.code, r.body)
	}
	if code, b := post(t, urls[1]+"/v1/leases/job/acquire", `{"holder":"barger","ttl_ms":60000}`); code != 409 {
		t.Errorf("acquire without waiting while w0 waits = %d %v, want 409", code, b)
	}
	if code, b := post(t, urls[2]+"/v1/leases/job/release", fmt.Sprintf(`{"lease_id":%q}`, r.body["lease_id"])); code != 204 {
		t.Fatalf("release of next = %d %v", code, b)
	}
	r = testwait.Receive(t, granted, 10*time.Second)
	if r.code != 200 || r.body["holder"] != "w0" {
		t.Fatalf("second grant = %d %v; want w0, first come first served again", r.code, r.body)
	}
	waitWaiters(t, urls[0], "job", 0)
}

// TestHandoverTargetJoinsInLockDelay: a grant with a lock delay, asked to hand over to "next",
// expires; "next" joins the line during the lock delay, on the same replica as w0, who waited
// before. "next" is granted first when the lock delay ends, then w0: this replica's line puts
// the holder handed to first, as the database does, or neither would be served.
func TestHandoverTargetJoinsInLockDelay(t *testing.T) {
	urls := pgReplicas(t, 2)
	expired := watchFor(t, urls[0], "job", "expired")
	code, held := post(t, urls[0]+"/v1/leases/job/acquire", `{"holder":"holder","ttl_ms":1000,"lock_delay_ms":2000}`)
	if code != 200 {
		t.Fatalf("acquire = %d %v", code, held)
	}
	granted := make(chan answer, 2)
	wait := func(holder string) {
		go func() {
			c, b := post(t, urls[0]+"/v1/leases/job/acquire", fmt.Sprintf(`{"holder":%q,"ttl_ms":60000,"wait_ms":30000}`, holder))
			granted <- answer{c, b}
		}()
	}
	wait("w0")
	waitWaiters(t, urls[1], "job", 1)
	if code, b := post(t, urls[1]+"/v1/leases/job/handover", `{"to":"next"}`); code/100 != 2 {
		t.Fatalf("handover to next = %d %v", code, b)
	}
	// The grant expires (nobody renews it) and its lock delay runs. Replica 0 hands its events
	// to its line before its watch stream: once the stream shows the expiry, its line has seen
	// it, with "next" not in line yet.
	select {
	case <-expired:
	case <-time.After(10 * time.Second):
		t.Fatal("no expired event on the watch stream of replica 0 within 10 s")
	}
	wait("next")
	waitWaiters(t, urls[1], "job", 2)
	r := testwait.Receive(t, granted, 10*time.Second)
	if r.code != 200 || r.body["holder"] != "next" {
		t.Fatalf("first grant after the lock delay = %d %v; want next, the holder the handover named", r.code, r.body)
	}
	if code, b := post(t, urls[1]+"/v1/leases/job/release", fmt.Sprintf(`{"lease_id":%q}`, r.body["lease_id"])); code != 204 {
		t.Fatalf("release of next = %d %v", code, b)
	}
	r = testwait.Receive(t, granted, 10*time.Second)
	if r.code != 200 || r.body["holder"] != "w0" {
		t.Fatalf("second grant = %d %v; want w0", r.code, r.body)
	}
}

// watchFor subscribes to the watch stream of the replica at url and returns a channel closed
// when an event of type typ about name comes on it.
func watchFor(t *testing.T, url, name, typ string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/watch?prefix="+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := servicetest.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /v1/watch = %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET /v1/watch = %d", resp.StatusCode)
	}
	seen := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			if sc.Text() == "event: "+typ {
				close(seen)
				return
			}
		}
	}()
	return seen
}
