package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// binDir holds the leasekeeper binary of the integration tests; TestMain removes it.
var binDir string

// The binary is built once, by the first integration test that needs it, not up front in
// TestMain: this test binary is also re-executed as a helper process (TestRunHelperProcess),
// and `go test -run` of other tests should not pay for a build either.
var (
	buildOnce            sync.Once
	binary, binaryWhy    string
	binaryBuildErr       error
	binaryBuildErrOutput []byte
)

// pg is the PostgreSQL server of the tests that serve on PostgreSQL, started by the first.
var pg = new(pgtest.Server)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	pg.Stop()
	os.Exit(code)
}

func buildBinary() {
	goBin, err := exec.LookPath("go")
	if err != nil {
		binaryWhy = "`go` is not on PATH, so the real binary cannot be built"
		fmt.Fprintln(os.Stderr, "\n*** SKIPPING the integration tests of the real binary: "+binaryWhy+" ***\n")
		return
	}
	if binDir, err = os.MkdirTemp("", "leasekeeper-bin-"); err != nil {
		binaryBuildErr = err
		return
	}
	out := filepath.Join(binDir, "leasekeeper")
	if binaryBuildErrOutput, binaryBuildErr = exec.Command(goBin, "build", "-o", out, ".").CombinedOutput(); binaryBuildErr == nil {
		binary = out
	}
}

// proc is the real binary serving one database.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	c      *api.ClientWithResponses
	exited chan error
}

func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test of the real binary skipped in -short mode")
	}
	buildOnce.Do(buildBinary)
	switch {
	case binaryBuildErr != nil:
		t.Fatalf("go build: %v\n%s", binaryBuildErr, binaryBuildErrOutput)
	case binary == "":
		t.Skip("SKIP integration test of the real binary: " + binaryWhy)
	}
}

// startBinary runs `leasekeeper serve` on a free port and the database db selects (flags), and
// waits for its address.
func startBinary(t *testing.T, db ...string) *proc {
	t.Helper()
	return startBinaryVia(t, nil, db...)
}

// startBinaryVia is startBinary with the binary run by via (a command and its arguments, to
// which the binary and its own are added): taskset, say.
func startBinaryVia(t *testing.T, via []string, db ...string) *proc {
	t.Helper()
	argv := append(append(via[:len(via):len(via)], binary, "serve", "--addr", "127.0.0.1:0", "--log-level", "warn"), db...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_ADMIN_KEY="+testAdminKey)
	p := &proc{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		p.exited <- nil
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case p.url = <-addr:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s serve did not print its address; stderr:\n%s", binary, p.stderr)
	}
	p.c, err = api.NewClientWithResponses(p.url, api.WithHTTPClient(&http.Client{Timeout: 5 * time.Second,
		Transport: servicetest.BearerTransport{Key: testAdminKey}}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kill9 kills the server at once: no shutdown, no checkpoint.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.exited
	p.exited <- err
}

// term stops the server with SIGTERM and wants a clean exit.
func (p *proc) term(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("server after SIGTERM: %v, want exit 0; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop 10 s after SIGTERM")
	}
}

func (p *proc) acquire(t *testing.T, name string, ttl time.Duration) api.Lease {
	t.Helper()
	r, err := p.c.AcquireLeaseWithResponse(context.Background(), name, nil, api.AcquireRequest{Holder: "it", TtlMs: ttl.Milliseconds()})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("AcquireLease(%q) = %v, %v", name, err, r)
	}
	return *r.JSON200
}

func (p *proc) events(t *testing.T, name string) []api.Event {
	t.Helper()
	var out []api.Event
	params := &api.ListLeaseEventsParams{Limit: ptrTo(1000)}
	for {
		r, err := p.c.ListLeaseEventsWithResponse(context.Background(), name, params)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("ListLeaseEvents(%q) = %v, %v", name, err, r)
		}
		out = append(out, r.JSON200.Events...)
		if r.JSON200.NextCursor == "" {
			return out
		}
		params.Cursor = ptrTo(r.JSON200.NextCursor)
	}
}

func ptrTo[T any](v T) *T { return &v }

// ack is an operation the server acknowledged.
type ack struct {
	op        string // acquire, renew, release
	name      string
	token     int64
	expiresAt time.Time
}

// TestKill9UnderLoad: clients acquire, renew and release many names while the server is
// killed with SIGKILL. After a restart on the same database every acknowledged operation is
// there (invariant 3), no token repeats and later tokens are larger (invariant 2), and a lease
// held at the kill is still held and renewable by its holder (invariant 5; on PostgreSQL, whose
// clock decides, without the conservative extension). On both backends.
func TestKill9UnderLoad(t *testing.T) {
	needBinary(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testKill9UnderLoad(t, b) })
	}
}

func testKill9UnderLoad(t *testing.T, b backend) {
	db := b.args(t)
	p := startBinary(t, db...)
	ctx := context.Background()
	const ttl = 30 * time.Second
	kept := p.acquire(t, "held-at-kill", ttl)

	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("load-%d", (w*5+i)%24)
				r, err := p.c.AcquireLeaseWithResponse(ctx, name, nil, api.AcquireRequest{Holder: fmt.Sprintf("w%d", w), TtlMs: ttl.Milliseconds()})
				if err != nil {
					return // the server is gone: this request was never acknowledged
				}
				if r.JSON200 == nil {
					continue
				}
				l := r.JSON200
				mu.Lock()
				acks = append(acks, ack{"acquire", name, l.Token, l.ExpiresAt.Time})
				mu.Unlock()
				rn, err := p.c.RenewLeaseWithResponse(ctx, name, api.RenewRequest{LeaseId: *l.LeaseId})
				if err != nil {
					return
				}
				if rn.JSON200 != nil {
					mu.Lock()
					acks = append(acks, ack{"renew", name, l.Token, rn.JSON200.ExpiresAt.Time})
					mu.Unlock()
				}
				if i%4 != 3 { // most are released; the rest stay held across the kill
					rel, err := p.c.ReleaseLeaseWithResponse(ctx, name, api.ReleaseRequest{LeaseId: *l.LeaseId})
					if err != nil {
						return
					}
					if rel.StatusCode() == http.StatusNoContent {
						mu.Lock()
						acks = append(acks, ack{"release", name, l.Token, time.Time{}})
						mu.Unlock()
					}
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	p.kill9(t) // while the workers are mid-request
	close(stop)
	wg.Wait()
	if len(acks) < 20 {
		t.Fatalf("only %d operations acknowledged before the kill: no load", len(acks))
	}
	t.Logf("%d operations acknowledged before the kill", len(acks))

	restartedAt := time.Now()
	q := startBinary(t, db...)
	maxBefore := kept.Token
	seen := map[int64]string{}
	for _, a := range acks {
		if a.op != "acquire" {
			continue
		}
		if prev, dup := seen[a.token]; dup {
			t.Errorf("token %d granted twice: %s and %s", a.token, prev, a.name)
		}
		seen[a.token] = a.name
		maxBefore = max(maxBefore, a.token)
	}
	states := map[string]api.LeaseState{}
	events := map[string][]api.Event{}
	for _, a := range acks {
		if _, ok := states[a.name]; !ok {
			r, err := q.c.GetLeaseWithResponse(ctx, a.name)
			if err != nil || r.JSON200 == nil {
				t.Fatalf("GetLease(%q) after restart = %v, %v; an acknowledged grant is lost", a.name, err, r)
			}
			states[a.name] = *r.JSON200
			events[a.name] = q.events(t, a.name)
		}
		st := states[a.name]
		if st.Token < a.token {
			t.Errorf("%s of %q token %d acknowledged, but after restart the name shows token %d", a.op, a.name, a.token, st.Token)
		}
		want := map[string]api.EventType{"acquire": api.EventTypeAcquired, "renew": api.EventTypeRenewed, "release": api.EventTypeReleased}[a.op]
		found := false
		for _, e := range events[a.name] {
			found = found || e.Token == a.token && e.Type == want && (a.op != "renew" || e.ExpiresAt != nil && e.ExpiresAt.Equal(a.expiresAt))
		}
		if !found {
			t.Errorf("%s of %q token %d was acknowledged but is not in the history after restart", a.op, a.name, a.token)
		}
		if st.Token == a.token {
			switch a.op {
			case "release":
				if st.Held {
					t.Errorf("%q token %d: release acknowledged, but held after restart", a.name, a.token)
				}
			case "acquire", "renew":
				if st.Held && st.ExpiresAt.Before(a.expiresAt) {
					t.Errorf("%q token %d: expires %v after restart, before the acknowledged %v", a.name, a.token, st.ExpiresAt, a.expiresAt)
				}
			}
		}
	}

	// The lease held at the kill is held still, until at least restart + its ttl, and its
	// holder keeps it.
	r, err := q.c.GetLeaseWithResponse(ctx, "held-at-kill")
	if err != nil || r.JSON200 == nil || !r.JSON200.Held || r.JSON200.Token != kept.Token {
		t.Fatalf("GetLease(held-at-kill) after restart = %v %s, %v; want held with token %d", r.Status(), r.Body, err, kept.Token)
	}
	if floor := restartedAt.Add(ttl).Truncate(time.Millisecond); !b.clockInDatabase && r.JSON200.ExpiresAt.Before(floor) {
		t.Errorf("held-at-kill expires %v, want at least restart + ttl = %v (conservative restart)", r.JSON200.ExpiresAt, floor)
	}
	rn, err := q.c.RenewLeaseWithResponse(ctx, "held-at-kill", api.RenewRequest{LeaseId: *kept.LeaseId})
	if err != nil || rn.JSON200 == nil || rn.JSON200.Token != kept.Token {
		t.Errorf("RenewLease(held-at-kill) by its holder after restart = %v %s, %v; want 200", rn.Status(), rn.Body, err)
	}

	// Tokens after the restart are above every token before it, acknowledged or not.
	for _, evs := range events {
		for _, e := range evs {
			maxBefore = max(maxBefore, e.Token)
		}
	}
	for i := range 3 {
		l := q.acquire(t, fmt.Sprintf("after-%d", i), time.Second)
		if l.Token <= maxBefore {
			t.Errorf("token after restart %d, want > %d (every token before)", l.Token, maxBefore)
		}
		maxBefore = l.Token
	}
}

// TestRestoreOlderDatabase: a copy of the database taken earlier and put back still issues
// tokens above every token issued before the restore (invariant 2).
func TestRestoreOlderDatabase(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	db, backup := filepath.Join(dir, "lk.db"), filepath.Join(dir, "backup")
	p := startBinary(t, "--db", db)
	first := p.acquire(t, "job", time.Second)
	p.term(t)
	copyDB(t, db, backup)

	p = startBinary(t, "--db", db)
	var last int64
	for i := range 20 {
		last = p.acquire(t, fmt.Sprintf("n%d", i), time.Hour).Token
	}
	if last <= first.Token {
		t.Fatalf("tokens did not grow before the restore: %d then %d", first.Token, last)
	}
	p.term(t)
	copyDB(t, backup, db)

	q := startBinary(t, "--db", db)
	if r, err := q.c.GetLeaseWithResponse(context.Background(), "n0"); err != nil || r.StatusCode() != http.StatusNotFound {
		t.Fatalf("GetLease(n0) after the restore = %v, %v; want 404 (the old copy is in use)", r.Status(), err)
	}
	for i := range 3 {
		l := q.acquire(t, fmt.Sprintf("restored-%d", i), time.Second)
		if l.Token <= last {
			t.Errorf("token after restoring an older copy %d, want > %d (issued before the restore)", l.Token, last)
		}
		last = l.Token
	}
}

// copyDB copies an SQLite database with its WAL files (the server is stopped); files the
// source lacks are removed from the destination.
func copyDB(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(from + suffix)
		if os.IsNotExist(err) {
			os.Remove(to + suffix)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
