package faults

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// event is one entry of a lease's history.
type event struct {
	Type  string    `json:"type"`
	Token int64     `json:"token"`
	At    time.Time `json:"at"`
}

// history reads every event of name, oldest first.
func (s *server) history(t testing.TB, name string) []event {
	t.Helper()
	var out []event
	cursor := ""
	for {
		rep := s.call(context.Background(), "GET", "/v1/leases/"+name+"/events?limit=1000&cursor="+cursor, nil)
		page, err := decode[struct {
			Events     []event `json:"events"`
			NextCursor string  `json:"next_cursor"`
		}](rep)
		if err != nil || rep.status != http.StatusOK {
			t.Fatalf("events of %s: %v %d %s", name, err, rep.status, rep.body)
		}
		out = append(out, page.Events...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// span is one grant by the server's clock: from its acquired event to its end.
type span struct {
	token      int64
	start, end time.Time
	how        string // released, expired, revoked, or "" while held
}

// spans turns a history into grants and reports every pair that overlaps (invariant 1).
func spans(evs []event) (map[int64]*span, []string) {
	byToken := map[int64]*span{}
	var order []*span
	for _, e := range evs {
		switch e.Type {
		case "acquired":
			sp := &span{token: e.Token, start: e.At}
			byToken[e.Token] = sp
			order = append(order, sp)
		case "released", "expired", "revoked":
			if sp := byToken[e.Token]; sp != nil {
				sp.end, sp.how = e.At, e.Type
			}
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].start.Before(order[j].start) })
	var bad []string
	for i := 1; i < len(order); i++ {
		prev, cur := order[i-1], order[i]
		if prev.how == "" || cur.start.Before(prev.end) {
			bad = append(bad, fmt.Sprintf("token %d [%v, %v %s] overlaps token %d from %v",
				prev.token, prev.start, prev.end, prev.how, cur.token, cur.start))
		}
	}
	return byToken, bad
}

func TestSpansFindOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	evs := []event{{"acquired", 1, t0}, {"acquired", 2, t0.Add(time.Second)}, {"expired", 1, t0.Add(2 * time.Second)}, {"released", 2, t0.Add(3 * time.Second)}}
	if _, bad := spans(evs); len(bad) != 1 {
		t.Fatalf("spans(overlapping history) found %v, want one overlap", bad)
	}
	evs[1], evs[2] = evs[2], evs[1]
	evs[1].At, evs[2].At = t0.Add(time.Second), t0.Add(2*time.Second)
	if _, bad := spans(evs); len(bad) != 0 {
		t.Fatalf("spans(sequential history) found %v, want none", bad)
	}
}

// pauseServer runs 12 Go clients contending for 3 names with 1 s leases, each holding its
// lease (kept alive) until it ends, stops the server with SIGSTOP for 3 s, and returns the
// history and, per token, when the client's lease context ended (client clock).
func pauseServer(t *testing.T) (map[int64]*span, []string, map[int64]clientEnd) {
	s := start(t, binary(t), filepath.Join(t.TempDir(), "lk.db"))
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	ended := map[int64]clientEnd{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			c, err := client.New(s.url, client.WithAPIKey(adminKey))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for ctx.Err() == nil {
				l, err := c.Acquire(ctx, fmt.Sprintf("paused-%d", i%3), client.AcquireOptions{Holder: fmt.Sprintf("w%d", i), TTL: time.Second, Wait: 10 * time.Second})
				if err != nil {
					continue
				}
				select {
				case <-l.Context().Done():
					mu.Lock()
					ended[l.Token()] = clientEnd{at: time.Now(), deadline: l.Deadline()}
					mu.Unlock()
				case <-ctx.Done():
				}
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				l.Release(rctx)
				rcancel()
			}
		})
	}
	time.Sleep(time.Second) // the leases are granted and kept alive
	s.signal(syscall.SIGSTOP)
	time.Sleep(3 * time.Second) // three ttls
	s.signal(syscall.SIGCONT)
	time.Sleep(2 * time.Second) // after the pause: renewals refused, others granted
	cancel()
	waitGroup(t, &wg, 30*time.Second)
	byToken := map[int64]*span{}
	var bad []string
	for i := range 3 {
		b, o := spans(s.history(t, fmt.Sprintf("paused-%d", i)))
		maps.Copy(byToken, b)
		bad = append(bad, o...)
	}
	return byToken, bad, ended
}

// clientEnd is when a lease context was seen to end, and the deadline the client computed for it
// (client clock: acquire or last renewal sent + ttl - margin).
type clientEnd struct{ at, deadline time.Time }

// schedSlack allows for the goroutine that notices the end being scheduled late on a loaded
// machine; the deadline itself is checked strictly. A context that does not end at its
// deadline ends seconds late in this test, so the slack can be wide enough for a machine under a
// load of 10 on two cores (30 ms was not).
const schedSlack = 500 * time.Millisecond

// TestPauseServer: a server stopped for longer than the ttls keeps mutual exclusion in its
// history, and the Go client's lease context of every lease the server expired during the
// pause ended before the server's expiry (invariants 1 and 9).
func TestPauseServer(t *testing.T) {
	byToken, bad, ended := pauseServer(t)
	for _, b := range bad {
		t.Error(b)
	}
	expired, checked := 0, 0
	lead := time.Duration(math.MaxInt64) // the least time a context ended before its expiry
	for tok, sp := range byToken {
		if sp.how != "expired" {
			continue
		}
		expired++
		end, ok := ended[tok]
		if !ok {
			t.Errorf("token %d expired on the server but its client's lease context never ended", tok)
			continue
		}
		checked++
		lead = min(lead, sp.end.Sub(end.at))
		if !end.deadline.Before(sp.end) {
			t.Errorf("token %d: the client's deadline %v is not before the server's expiry %v", tok, end.deadline, sp.end)
		}
		if !end.at.Before(sp.end.Add(schedSlack)) {
			t.Errorf("token %d: the client's lease context ended at %v, not before the server's expiry %v", tok, end.at, sp.end)
		}
	}
	if expired == 0 {
		t.Fatal("no lease expired during the pause: the test did not test")
	}
	msg := fmt.Sprintf("grants=%d expired_in_pause=%d client_contexts_checked=%d least_lead=%v overlaps=%d", len(byToken), expired, checked, lead, len(bad))
	t.Log(msg)
	fmt.Println("FAULTS server pause: " + msg)
}

func waitGroup(t testing.TB, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("goroutines still running after %v", d)
	}
}

func (s *server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// TestMain lets the test binary serve as the paused client process of TestPauseClient.
func TestMain(m *testing.M) {
	if url := os.Getenv("LEASEKEEPER_FAULTS_WRITER"); url != "" {
		os.Exit(writer(url))
	}
	code := m.Run()
	crashPG.Stop()
	os.Exit(code)
}

// writer is a client process that takes a lease and then writes with its token forever,
// printing each answer's status, without looking at its lease context: the worst client.
func writer(url string) int {
	s := &server{url: url}
	rep := s.call(context.Background(), "POST", "/v1/leases/client-paused/acquire", map[string]any{"holder": "writer", "ttl_ms": 1000})
	l, err := decode[leaseReply](rep)
	if err != nil || rep.status != http.StatusOK {
		fmt.Println("acquire failed", rep.status, err)
		return 1
	}
	for i := 0; ; i++ {
		rep := s.call(context.Background(), "PUT", "/v1/resources/client-paused", []byte("from the writer "+strconv.Itoa(i)),
			"Fencing-Token", strconv.FormatInt(l.Token, 10), "Lease-Name", "client-paused", "Content-Type", "text/plain")
		fmt.Println("write", l.Token, rep.status)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPauseClient: a client process stopped past its ttl, whose lease passed to another
// holder meanwhile, has its late write refused (invariant 7).
func TestPauseClient(t *testing.T) {
	s := start(t, binary(t), filepath.Join(t.TempDir(), "lk.db"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEASEKEEPER_FAULTS_WRITER="+s.url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the writer process ended")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line from the writer process in 10 s")
		}
		return ""
	}
	if l := next(); !strings.HasSuffix(l, " 201") {
		t.Fatalf("the writer's first write: %q, want 201 (it creates the resource)", l)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for len(lines) > 0 {
		<-lines
	}
	c, err := client.New(s.url, client.WithAPIKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Acquire(context.Background(), "client-paused", client.AcquireOptions{TTL: 10 * time.Second, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("acquire after the writer's ttl: %v", err)
	}
	defer l.Release(context.Background())
	if _, err := c.PutResource(l.Context(), "client-paused", l.Token(), []byte("from the successor"), client.PutOptions{Lease: "client-paused", ContentType: "text/plain"}); err != nil {
		t.Fatalf("successor's write: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	late := next()
	if !strings.HasSuffix(late, " 409") {
		t.Errorf("the paused writer's late write: %q, want 409", late)
	}
	rep := s.call(context.Background(), "GET", "/v1/resources/client-paused", nil)
	if string(rep.body) != "from the successor" {
		t.Errorf("resource after the late write = %q, want the successor's", rep.body)
	}
	fmt.Printf("FAULTS client pause: late write %q, successor token %d\n", late, l.Token())
}
