package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestRun runs the program against a real leasekeeper: two holders write in turn, a forced
// token equal to the fence is accepted, a stale one is refused and shows in the server's
// rejections with the program's User-Agent, and a held lease is not written under.
func TestRun(t *testing.T) {
	srv, _ := servicetest.Start(t, service.Config{}, sqlite.Options{})
	dbPath := filepath.Join(t.TempDir(), "demo.db")
	ctx := context.Background()
	common := []string{"-server", srv.URL, "-db", dbPath, "-name", "demo", "-holder", "tester"}
	key := servicetest.KeyOf(srv.URL)
	getenv := func(k string) string {
		if k == "LEASEKEEPER_API_KEY" {
			return key
		}
		return ""
	}
	c, err := client.New(srv.URL, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	runOK := func(t *testing.T, extra ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, append(common, extra...), getenv, &out, &errOut); err != nil {
			t.Fatalf("run(%v) = %v; stderr %s", extra, err, errOut.String())
		}
		return out.String()
	}
	state := func(t *testing.T) client.State {
		t.Helper()
		st, err := c.Get(ctx, "demo")
		if err != nil {
			t.Fatalf("Get = %v", err)
		}
		return st
	}

	var fence int64
	t.Run("OK/AcquireWriteRelease", func(t *testing.T) {
		out := runOK(t, "-value", "one")
		st := state(t)
		want := "acquired \"demo\": token " + strconv.FormatInt(st.Token, 10)
		if !strings.Contains(out, want) || !strings.Contains(out, "wrote row \"demo\"") {
			t.Errorf("output %q lacks %q and the write", out, want)
		}
		if st.Held || st.End != "released" {
			t.Errorf("after run: held %v end %q, want released", st.Held, st.End)
		}
	})
	t.Run("OK/SecondHolderHigherToken", func(t *testing.T) {
		runOK(t, "-value", "two")
		fence = state(t).Token
	})
	t.Run("OK/EqualForcedToken", func(t *testing.T) {
		runOK(t, "-token", strconv.FormatInt(fence, 10), "-value", "three")
	})
	t.Run("ErrStale/Reported", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(common, "-token", "1000", "-value", "stale"), getenv, &out, &errOut)
		if !errors.Is(err, errStale) || !strings.Contains(out.String(), "rejection reported") {
			t.Fatalf("run with a stale token = %v (output %q), want errStale, reported", err, out.String())
		}
		ac, err := api.NewClientWithResponses(srv.URL, api.WithHTTPClient(servicetest.Client()))
		if err != nil {
			t.Fatal(err)
		}
		resource := "demo"
		resp, err := ac.ListRejectionsWithResponse(ctx, &api.ListRejectionsParams{Resource: &resource})
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("ListRejections = %v, %v", resp.Status(), err)
		}
		type row struct {
			Lease, UserAgent, Reason string
			Presented, Current       int64
		}
		var got []row
		for _, r := range resp.JSON200.Rejections {
			got = append(got, row{deref(r.Lease), deref(r.UserAgent), deref(r.Reason), r.PresentedToken, r.CurrentFence})
		}
		want := []row{{"demo", userAgent, "stale write to table kv in " + dbPath, 1000, fence}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the server's rejections (-want +got):\n%s", diff)
		}
	})
	t.Run("ErrLeaseHeld", func(t *testing.T) {
		l, err := c.Acquire(ctx, "demo", client.AcquireOptions{Holder: "someone", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release(ctx) })
		var out, errOut bytes.Buffer
		err = run(ctx, common, getenv, &out, &errOut)
		if !errors.Is(err, client.ErrLeaseHeld) || !strings.Contains(err.Error(), "someone") {
			t.Fatalf("run while held = %v, want ErrLeaseHeld naming the holder", err)
		}
	})

	db, err := openDB(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var value string
	var f int64
	if err := db.QueryRow(`SELECT value, fence FROM kv WHERE name = 'demo'`).Scan(&value, &f); err != nil {
		t.Fatal(err)
	}
	if value != "three" || f != fence {
		t.Errorf("row = %q, fence %d; want \"three\", fence %d", value, f, fence)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
