package main

import (
	"bytes"
	"context"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// TestLeaderWatchFollowsChanges: leader --watch prints each change of leader, on each backend.
func TestLeaderWatchFollowsChanges(t *testing.T) { onBackends(t, testLeaderWatchFollowsChanges) }

func testLeaderWatchFollowsChanges(t *testing.T, srv string) {
	c, err := client.New(srv, client.WithHTTPClient(servicetest.Bearer(adminKeyOf(srv))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := c.Acquire(ctx, "leader", client.AcquireOptions{Holder: "node-1", TTL: time.Minute, Metadata: map[string]any{"addr": "a:1"}})
	if err != nil {
		t.Fatal(err)
	}

	var out syncBuffer
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		getenv := func(k string) string {
			switch k {
			case "LEASEKEEPER_SERVER":
				return srv
			case "LEASEKEEPER_API_KEY":
				return adminKeyOf(srv)
			}
			return ""
		}
		done <- run(watchCtx, []string{"leader", "--watch", "leader"}, getenv, &out, &out)
	}()
	waitLines := func(n int) []string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if l := out.lines(); len(l) >= n && l[0] != "" {
				return l
			}
		}
		t.Fatalf("leader --watch printed %q, want %d lines", out.lines(), n)
		return nil
	}
	waitLines(1)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := c.Acquire(ctx, "leader", client.AcquireOptions{Holder: "node-2", TTL: time.Minute, Metadata: map[string]any{"addr": "b:2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	lines := waitLines(3)
	stop()
	if err := <-done; err != nil {
		t.Errorf("leader --watch ended with %v, want nil on interrupt", err)
	}
	wants := []string{"leader node-1 token=", "no leader (last: node-1", "leader node-2 token="}
	for i, want := range wants {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], `metadata={"addr":"b:2"}`) {
		t.Errorf("line %q, want the new leader's metadata", lines[2])
	}
}
