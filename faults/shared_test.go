package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// TestKill9SharedLeases: readers and writers contend for one name while the server is killed
// with SIGKILL at a random moment, cycle after cycle. Over every restart, the name's history
// never shows an exclusive grant opened beside any other open grant, nor a shared one beside an
// exclusive (RW1): the shared grants held at a kill keep writers out after the restart until
// they expire (conservative restart), as every other grant does.
func TestKill9SharedLeases(t *testing.T) {
	evs := sharedKillLoop(t, binary(t), cycles(3, 50))
	if err := storetest.CheckModes(evs); err != nil {
		t.Fatal(err)
	}
	modes := map[lease.Mode]int{}
	for _, e := range evs {
		if e.Type == lease.EventAcquired {
			modes[e.Mode]++
		}
	}
	t.Logf("%d events, grants by mode %v", len(evs), modes)
	if modes[lease.ModeShared] == 0 || modes[""] == 0 {
		t.Errorf("grants by mode %v: want both shared and exclusive grants", modes)
	}
}

// TestKill9SharedLeasesCatchesOverlap is the check's negative control: a server that grants
// an exclusive lease beside shared ones must be caught.
func TestKill9SharedLeasesCatchesOverlap(t *testing.T) {
	bin := binary(t, mutation{file: "lease/shared.go",
		find: "if e := sharedHeld(h, now); e != nil {",
		repl: "if e := sharedHeld(h, now); e != nil && false {"})
	if err := storetest.CheckModes(sharedKillLoop(t, bin, 2)); err == nil {
		t.Fatal("the check found no exclusive grant beside a shared one, against a server that grants them")
	}
}

// sharedKillLoop runs n cycles of 8 clients contending for "rw" against bin, killing the
// server with SIGKILL at a random moment in each, and returns the name's history read after a
// last restart.
func sharedKillLoop(t *testing.T, bin string, n int) []lease.Event {
	db := filepath.Join(t.TempDir(), "lk.db")
	var acked [2]atomic.Int64 // grants answered: shared, exclusive
	for range n {
		s := start(t, bin, db)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		shared, excl := acked[0].Load(), acked[1].Load()
		for i := range 8 {
			wg.Go(func() { contend(ctx, s, i, &acked) })
		}
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond) // the kill's random moment
		// However slow the machine, each cycle has grants of both modes before its kill.
		for wait := time.Now(); (acked[0].Load()-shared < 4 || acked[1].Load()-excl < 2) && time.Since(wait) < 30*time.Second; {
			time.Sleep(10 * time.Millisecond)
		}
		s.kill()
		cancel()
		wg.Wait()
	}
	return history(t, start(t, bin, db), "rw")
}

// contend acquires "rw" as client i, shared three times in four and otherwise exclusive, and
// releases it, until ctx ends. Writers wait in line (ahead of the readers that come after
// them); readers wait in line every other time, so that readers behind a writer are granted
// together after it, and otherwise are refused while a writer waits. acked counts the grants
// answered: shared, exclusive.
func contend(ctx context.Context, s *server, i int, acked *[2]atomic.Int64) {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		mode, kind := lease.ModeShared, 0
		if rng.IntN(4) == 0 {
			mode, kind = lease.ModeExclusive, 1
		}
		req := map[string]any{"holder": fmt.Sprintf("c%d", i), "ttl_ms": 1000, "mode": mode}
		if mode == lease.ModeExclusive || rng.IntN(2) == 0 {
			req["wait_ms"] = 2000
		}
		r := s.call(ctx, "POST", "/v1/leases/rw/acquire", req)
		if r.status != http.StatusOK {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		acked[kind].Add(1)
		l, err := decode[leaseReply](r)
		if err != nil {
			continue
		}
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
		s.call(ctx, "POST", "/v1/leases/rw/release", map[string]any{"lease_id": l.LeaseID})
	}
}

// history reads every event of name and its slots from the start, in seq order, through the
// watch stream: a sentinel grant of another name marks its end.
func history(t *testing.T, s *server, name string) []lease.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end := name + "-end"
	if r := s.call(ctx, "POST", "/v1/leases/"+end+"/acquire", map[string]any{"holder": "checker", "ttl_ms": 1000}); r.status != http.StatusOK {
		t.Fatalf("acquire the sentinel = %d %s %v", r.status, r.body, r.err)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/watch?prefix="+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []lease.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			Seq   int64           `json:"seq"`
			Type  lease.EventType `json:"type"`
			Name  string          `json:"name"`
			Token int64           `json:"token"`
			Mode  lease.Mode      `json:"mode"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if e.Name == end {
			return out
		}
		if parent, _, _ := lease.SlotOf(e.Name); parent == name {
			out = append(out, lease.Event{Seq: e.Seq, Type: e.Type, Name: e.Name, Token: e.Token, Mode: e.Mode})
		}
	}
	t.Fatalf("the watch stream ended before the sentinel: %v", sc.Err())
	return nil
}
