package client_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// Do runs work under a lease: it acquires the lease, passes the work a context that ends
// before the server could consider the lease expired, and releases the lease afterwards,
// even if the work panics.
func ExampleDo() {
	url, key, stop := exampleServer() // a leasekeeper of the example's own
	defer stop()
	c, err := client.New(url, client.WithAPIKey(key))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = client.Do(context.Background(), c, "nightly-report", client.AcquireOptions{TTL: 15 * time.Second},
		func(ctx context.Context, token int64) error {
			// Work under ctx, and send token with every write the lease protects.
			fmt.Println("working with a fencing token:", token > 0)
			return nil
		})
	fmt.Println("done:", err)
	// Output:
	// working with a fencing token: true
	// done: <nil>
}

// Acquire answers a *HeldError while somebody else holds the name. A held lease's context
// ends as soon as the lease is lost (here an administrator revokes it), and Release then
// reports the loss: the work may have overlapped another holder's.
func ExampleClient_Acquire() {
	url, key, stop := exampleServer()
	defer stop()
	c, err := client.New(url, client.WithAPIKey(key))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Acquire(ctx, "billing", client.AcquireOptions{Holder: "worker-a"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Acquire(ctx, "billing", client.AcquireOptions{Holder: "worker-b"})
	var held *client.HeldError
	if errors.As(err, &held) {
		fmt.Printf("held by %q\n", held.Holder)
	}

	if err := c.Revoke(ctx, "billing"); err != nil {
		log.Fatal(err)
	}
	<-l.Context().Done()
	fmt.Println("lost:", errors.Is(context.Cause(l.Context()), client.ErrLeaseLost))
	fmt.Println("release:", errors.Is(l.Release(ctx), client.ErrLeaseLost))
	// Output:
	// held by "worker-a"
	// lost: true
	// release: true
}

// An election: Campaign waits until the candidate leads and returns its term's lease;
// anybody can ask who leads; Resign hands over at once.
func ExampleElection() {
	url, key, stop := exampleServer()
	defer stop()
	c, err := client.New(url, client.WithAPIKey(key))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	e := c.NewElection("scheduler", client.ElectionOptions{Candidate: "node-1", Metadata: map[string]any{"addr": "10.0.0.1:9000"}})
	term, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Lead under term.Context(), sending term.Token() with every write.
	leader, err := c.Leader(ctx, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Holder, leader.Metadata["addr"], leader.Token == term.Token())

	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = c.Leader(ctx, "scheduler")
	fmt.Println("after resigning:", errors.Is(err, client.ErrNoLeader))
	// Output:
	// leader: node-1 10.0.0.1:9000 true
	// after resigning: true
}

// A Mutex locks a name as etcd's concurrency.Mutex does: Lock waits in the server's line,
// TryLock does not wait, and the lock's lease carries the fencing token to send with every
// write it protects.
func ExampleMutex() {
	url, key, stop := exampleServer()
	defer stop()
	c, err := client.New(url, client.WithAPIKey(key))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	m := c.NewMutex("billing", client.AcquireOptions{Holder: "worker-a", TTL: 15 * time.Second})
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Work under m.Lease().Context(), sending m.Token() with every write.
	other := c.NewMutex("billing", client.AcquireOptions{Holder: "worker-b"})
	fmt.Println("try lock:", errors.Is(other.TryLock(ctx), client.ErrLeaseHeld))
	fmt.Println("token:", m.Token() > 0)
	fmt.Println("unlock:", m.Unlock(ctx))
	fmt.Println("try lock again:", other.TryLock(ctx), other.Token() > 0)
	fmt.Println("unlock:", other.Unlock(ctx))
	// Output:
	// try lock: true
	// token: true
	// unlock: <nil>
	// try lock again: <nil> true
	// unlock: <nil>
}

// Do with a table of your own guarded by fence.Table: every write carries the lease's
// token and is refused when a newer holder has written. A write attempted after the lease
// context ended is not sent, and its error, like context.Cause, says why the context ended.
func ExampleDo_fencedTable() {
	url, key, stop := exampleServer()
	defer stop()
	c, err := client.New(url, client.WithAPIKey(key), client.WithUserAgent("invoicer/1.0"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dir, err := os.MkdirTemp("", "invoices")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Any database/sql driver; this one is github.com/mattn/go-sqlite3.
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "app.db")+"?_busy_timeout=5000")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE invoices (id TEXT PRIMARY KEY, state TEXT NOT NULL, fence INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Refused writes are reported to leasekeeper, which shows them on its dashboard.
	reports := c.Reporter().Async(0, nil)
	defer reports.Flush(ctx)
	invoices := fence.Table{Name: "invoices", KeyColumn: "id", FenceColumn: "fence", Lease: "invoicing", OnReject: reports.Report}

	var first int64
	err = client.Do(ctx, c, "invoicing", client.AcquireOptions{}, func(ctx context.Context, token int64) error {
		first = token
		return invoices.Upsert(ctx, db, "inv-7", token, map[string]any{"state": "sent"})
	})
	fmt.Println("first holder:", err)

	err = client.Do(ctx, c, "invoicing", client.AcquireOptions{}, func(ctx context.Context, token int64) error {
		if err := invoices.Upsert(ctx, db, "inv-7", token, map[string]any{"state": "paid"}); err != nil {
			return err
		}
		// The first holder's write, arriving late (it was paused, say): refused.
		late := invoices.Upsert(ctx, db, "inv-7", first, map[string]any{"state": "sent"})
		fmt.Println("late write refused:", errors.Is(late, client.ErrStaleToken))

		// An operator revokes the lease; its context ends, and the next write is not sent.
		if err := c.Revoke(context.Background(), "invoicing"); err != nil {
			return err
		}
		<-ctx.Done()
		err := invoices.Upsert(ctx, db, "inv-7", token, map[string]any{"state": "refunded"})
		fmt.Println("write after the loss:", errors.Is(err, client.ErrLeaseLost), errors.Is(context.Cause(ctx), client.ErrLeaseLost))
		return err
	})
	fmt.Println("second holder lost its lease:", errors.Is(err, client.ErrLeaseLost))
	// Output:
	// first holder: <nil>
	// late write refused: true
	// write after the loss: true true
	// second holder lost its lease: true
}
