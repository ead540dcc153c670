package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// forwarded are the signals run passes on to CMD.
func forwarded() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}
}

// exLeaseLost is run's exit status when the lease ended before CMD did: CMD was stopped, or
// finished after the lease had already ended, so its work may have overlapped another
// holder's. It lies outside sysexits (64-78), timeout(1)'s 124-125 and the shell's 126-165,
// though CMD could still return it by itself: stderr says which.
const exLeaseLost = 122

// runCommand is `leasekeeper run`: CMD runs only while the lease is held.
//
// A handover request (leasekeeper handover NAME) reaches CMD as SIGTERM: the lease stays held
// until CMD exits, and is then released, so the holder the request names is granted next.
//
// The lease renews itself and follows its name on the server's watch stream, so a revoke or
// a successor's grant stops CMD within moments, not at the next renewal. CMD runs in its own
// process group, so that stopping it on lease loss reaches every process it started; signals
// sent to run are passed on to that group. (A command in its own group cannot read from the
// terminal.)
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// CMD's output is copied into these writers by exec's goroutines while run writes its own
	// messages: one lock serializes both (they may be the same writer).
	var mu sync.Mutex
	stdout, stderr = &lockedWriter{mu: &mu, w: stdout}, &lockedWriter{mu: &mu, w: stderr}
	cf := newClientFlags("run", getenv, stdout, stderr)
	nf := &nameList{}
	cf.fs.Var(nf, "name", "the lease to hold while CMD runs (required); given more than once (or comma-separated), every name, all or none")
	lf := addLeaseFlags(cf.fs, getenv, "lease duration; renewed at a third of it")
	grace := duration(cf.fs, "grace", 10*time.Second, "after SIGTERM on lease loss, how long CMD has before SIGKILL")
	limit := cf.fs.Int("limit", 0, "hold one of this many slots of the name, a semaphore (like consul lock -n); 0: a plain lease")
	sf := addSessionFlags(cf.fs, getenv, true)
	flagArgs, argv, found := splitDashDash(args)
	if err := parseFlags(cf.fs, flagArgs, stdout); err != nil {
		return err
	}
	switch {
	case !found || len(argv) == 0:
		return &exitError{code: 2, err: errors.New("run: the command goes after a literal --: leasekeeper run --name N -- CMD [ARG]")}
	case cf.fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("run: unexpected %q before --", cf.fs.Args())}
	case len(nf.names) == 0:
		return &exitError{code: 2, err: errors.New("run: --name is required")}
	case len(nf.names) > 1 && *limit != 0:
		return &exitError{code: 2, err: errors.New("run: --limit takes one --name")}
	case *grace < 0:
		return &exitError{code: 2, err: errors.New("run: --grace must not be negative")}
	}
	c, ls, giveBack, err := lf.hold(ctx, cf, nf.names, sf, stderr, func(o *client.AcquireOptions) { o.Limit = *limit })
	if err != nil {
		if exitCode(err) == exTempFail {
			return &exitError{code: exTempFail, err: fmt.Errorf("run: not starting %s: %w", argv[0], err)}
		}
		return err
	}
	defer c.Close()
	relCtx := context.WithoutCancel(ctx) // release even after a signal ended ctx
	l := ls[0]                           // the leases of several names end together: the first's context tells for all

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		"LEASEKEEPER_FENCING_TOKEN="+strconv.FormatInt(l.Token(), 10),
		"LEASEKEEPER_LEASE_NAME="+l.Name(),
		"LEASEKEEPER_SLOT="+strconv.Itoa(l.Slot()),
		"LEASEKEEPER_SERVER="+c.BaseURL(),
		"LEASEKEEPER_FENCING_TOKENS="+tokensOf(ls),
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded()...)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		release(relCtx, "run", l.Name(), giveBack, stderr)
		return &exitError{code: 127, err: fmt.Errorf("run: start %s: %w", argv[0], err)}
	}
	pgid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var (
		lostCause error
		asked     = handoverOfAny(ls)
		leaseDone = l.Context().Done()
		killAfter <-chan time.Time
		werr      error
	)
wait:
	for {
		select {
		case s := <-sigs:
			syscall.Kill(-pgid, s.(syscall.Signal))
		case <-asked:
			// Cooperative: CMD decides how to stop; the lease is released once it has.
			asked = nil
			h, name := handoverOf(ls)
			fmt.Fprintf(stderr, "leasekeeper run: handover of %q requested (to %q, reason %q); sending SIGTERM to %s\n", name, h.To, h.Reason, argv[0])
			syscall.Kill(-pgid, syscall.SIGTERM)
		case <-leaseDone:
			leaseDone = nil
			lostCause = context.Cause(l.Context())
			fmt.Fprintf(stderr, "leasekeeper run: lease %q (token %d) lost: %v; sending SIGTERM to %s\n", l.Name(), l.Token(), lostCause, argv[0])
			syscall.Kill(-pgid, syscall.SIGTERM)
			t := time.NewTimer(*grace)
			defer t.Stop()
			killAfter = t.C
		case <-killAfter:
			fmt.Fprintf(stderr, "leasekeeper run: %s did not stop within the grace of %v; sending SIGKILL\n", argv[0], *grace)
			syscall.Kill(-pgid, syscall.SIGKILL)
		case werr = <-waited:
			break wait
		}
	}
	code := statusOf(cmd.ProcessState)

	rerr := release(relCtx, "run", l.Name(), giveBack, stderr)
	switch {
	case lostCause != nil:
		return &exitError{code: exLeaseLost, err: fmt.Errorf("run: lease %q was lost while %s ran, so it was stopped (its status %d): %w", l.Name(), argv[0], code, lostCause)}
	case errors.Is(rerr, client.ErrLeaseLost):
		return &exitError{code: exLeaseLost, err: fmt.Errorf("run: %s finished (status %d), but the lease had ended first; its work may have overlapped another holder's: %w", argv[0], code, rerr)}
	case code != 0:
		return &exitError{code: code, child: true, err: fmt.Errorf("run: %s: %w", argv[0], werr)}
	}
	return nil
}

// release gives the lease on name back with giveBack (a Lease's Release, an Election's
// Resign), bounded in time; a failure other than loss is only reported.
func release(ctx context.Context, cmd, name string, giveBack func(context.Context) error, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := giveBack(ctx)
	if err != nil && !errors.Is(err, client.ErrLeaseLost) {
		fmt.Fprintf(stderr, "leasekeeper %s: release %q: %v (it will expire on its own)\n", cmd, name, err)
	}
	return err
}

// tokensOf lists each lease's name and fencing token, "name=token" separated by spaces.
func tokensOf(ls []*client.Lease) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name() + "=" + strconv.FormatInt(l.Token(), 10)
	}
	return strings.Join(out, " ")
}

// handoverOfAny returns a channel closed when a handover of any lease of ls is first
// requested; it stops looking once the leases end.
func handoverOfAny(ls []*client.Lease) <-chan struct{} {
	if len(ls) == 1 {
		return ls[0].HandoverRequested()
	}
	asked := make(chan struct{})
	var once sync.Once
	for _, l := range ls {
		go func() {
			select {
			case <-l.HandoverRequested():
				once.Do(func() { close(asked) })
			case <-l.Context().Done():
			}
		}()
	}
	return asked
}

// handoverOf returns the first handover requested of a lease of ls, and its name.
func handoverOf(ls []*client.Lease) (client.HandoverRequest, string) {
	for _, l := range ls {
		if h := l.Handover(); h != nil {
			return *h, l.Name()
		}
	}
	return client.HandoverRequest{}, ls[0].Name()
}

// statusOf is a process's exit status as a shell reports it: 128+n when signal n ended it.
func statusOf(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// lockedWriter serializes writes to w with a lock it may share with other writers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
