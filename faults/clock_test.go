package faults

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// acquire takes name for ttl and wants 200.
func (s *server) acquire(t testing.TB, name string, ttl time.Duration) leaseReply {
	t.Helper()
	rep := s.call(context.Background(), "POST", "/v1/leases/"+name+"/acquire", map[string]any{"holder": "clock", "ttl_ms": ttl.Milliseconds()})
	l, err := decode[leaseReply](rep)
	if err != nil || rep.status != http.StatusOK {
		t.Fatalf("acquire %s: %v %d %s", name, err, rep.status, rep.body)
	}
	return l
}

// state reads name's lease state and wants 200.
func (s *server) state(t testing.TB, name string) leaseReply {
	t.Helper()
	rep := s.call(context.Background(), "GET", "/v1/leases/"+name, nil)
	l, err := decode[leaseReply](rep)
	if err != nil || rep.status != http.StatusOK || l.Held == nil {
		t.Fatalf("get %s: %v %d %s", name, err, rep.status, rep.body)
	}
	return l
}

// setHighWaterMark moves the newest persisted time of a stopped server's database to at. This
// reaches into the SQLite schema (meta.clock_hwm) of migrations/sqlite: it is how a wall clock
// behind the persisted time is made without a test-only flag in the binary.
func setHighWaterMark(t testing.TB, db string, at time.Time) {
	t.Helper()
	h, err := sql.Open("sqlite3", "file:"+db+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := h.Exec(`UPDATE meta SET value = ? WHERE key = 'clock_hwm'`, at.UnixMilli())
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("set clock_hwm: %v (%d rows): the schema changed, update the test", err, n)
	}
}

// TestWallClockBehindHighWaterMark: a server restarted with its wall clock 20 minutes behind
// the newest time it had persisted starts its clock at that time (invariant 4): new tokens and
// times are above everything persisted, and a lease held at the stop (ttl 50 minutes, so not
// yet expired at that time) stays held for at least its ttl after the restart by that clock
// (invariant 5).
func TestWallClockBehindHighWaterMark(t *testing.T) {
	bin := binary(t)
	db := filepath.Join(t.TempDir(), "lk.db")
	s := start(t, bin, db)
	const ttl = 50 * time.Minute
	live := s.acquire(t, "clock-live", ttl)
	s.kill()
	hwm := time.Now().Add(20 * time.Minute).Truncate(time.Millisecond)
	setHighWaterMark(t, db, hwm)

	s = start(t, bin, db)
	got := s.state(t, "clock-live")
	if !*got.Held || got.Token != live.Token {
		t.Errorf("clock-live after the restart: held=%v token %d, want held with %d", *got.Held, got.Token, live.Token)
	}
	if min := hwm.Add(ttl); got.ExpiresAt.Before(min) {
		t.Errorf("clock-live expires at %v after the restart, want at least the persisted time + ttl %v", got.ExpiresAt, min)
	}
	fresh := s.acquire(t, "clock-new", ttl)
	if fresh.Token <= live.Token || fresh.Token < hwm.UnixMicro() {
		t.Errorf("token after the restart %d, want above %d and at least the persisted time %d µs", fresh.Token, live.Token, hwm.UnixMicro())
	}
	if fresh.ExpiresAt.Before(hwm.Add(ttl)) {
		t.Errorf("a new lease expires at %v, want after the persisted time + ttl %v: the clock went back", fresh.ExpiresAt, hwm.Add(ttl))
	}
	fmt.Printf("FAULTS wall clock 20 min behind the persisted time: token %d → %d, live lease expires %v (persisted time %v)\n",
		live.Token, fresh.Token, got.ExpiresAt, hwm)
}

// TestMonotonicOffsets: restarts in time namespaces whose monotonic and boot clocks are offset
// far forward and back (the server's clock advances by them) keep tokens growing, and every
// lease held at the kill stays held, by the same token, for at least its ttl after the restart.
func TestMonotonicOffsets(t *testing.T) {
	bin := binary(t)
	if out, err := exec.Command("unshare", "--time", "--fork", "--monotonic=1", "true").CombinedOutput(); err != nil {
		skipUnlessRequired(t, fmt.Sprintf("time namespaces unavailable (needs root and unshare --time): %v %s", err, out))
	}
	up, err := uptime()
	if err != nil {
		t.Fatal(err)
	}
	// A negative offset may not take the clocks below zero.
	offsets := []int64{1_000_000_000, -(up - 5), 3_000_000, -(up / 2), 0}
	db := filepath.Join(t.TempDir(), "lk.db")
	const ttl = 20 * time.Second
	var held []leaseReply
	var maxToken int64
	for i, off := range offsets {
		sec := strconv.FormatInt(off, 10)
		restart := time.Now()
		s := start(t, bin, db, "unshare", "--time", "--fork", "--monotonic="+sec, "--boottime="+sec, "--")
		for _, h := range held {
			got := s.state(t, h.Holder)
			if !*got.Held || got.Token != h.Token {
				t.Errorf("offset %ds: %s held=%v token %d, want held with %d", off, h.Holder, *got.Held, got.Token, h.Token)
			}
			if got.ExpiresAt.Before(restart.Add(ttl)) {
				t.Errorf("offset %ds: %s expires at %v, before the restart + ttl %v", off, h.Holder, got.ExpiresAt, restart.Add(ttl))
			}
		}
		name := fmt.Sprintf("mono-%d", i)
		l := s.acquire(t, name, ttl)
		if l.Token <= maxToken {
			t.Errorf("offset %ds: token %d, not above %d", off, l.Token, maxToken)
		}
		if d := time.Until(l.ExpiresAt); d < ttl-5*time.Second || d > ttl+5*time.Second {
			t.Errorf("offset %ds: a new %v lease expires in %v: the server's clock moved with the offset", off, ttl, d)
		}
		maxToken, l.Holder = l.Token, name
		held = append(held, l)
		s.kill()
	}
	fmt.Printf("FAULTS monotonic offsets %v s: %d restarts, tokens grew, %d leases kept\n", offsets, len(offsets), len(held))
}

func uptime() (int64, error) {
	out, err := exec.Command("cat", "/proc/uptime").Output()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(strings.Fields(string(out))[0], 64)
	return int64(f), err
}
