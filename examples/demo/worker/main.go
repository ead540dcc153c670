// Command worker is the demo's worker: it takes a lease with the Go client, checks that it
// still holds it, and writes a fenced resource kept by leasekeeper with its fencing token.
//
// With -pause, the worker waits after the check until it is continued (SIGCONT): the demo
// freezes it there with SIGSTOP, past its ttl, to play a process paused by garbage collection
// or a slow disk between checking its lease and writing. Meanwhile another worker takes the
// lease and writes; the resumed worker's write, with its old token, is refused by the server.
//
// Exit status: 0 written, 4 write refused as stale, 75 lease not had, 1 other failure,
// 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitWritten  = 0
	exitFailed   = 1
	exitUsage    = 2
	exitStale    = 4
	exitTempFail = 75
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := getenv("LEASEKEEPER_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	fs.StringVar(&server, "server", server, "leasekeeper server URL (env LEASEKEEPER_SERVER)")
	name := fs.String("name", "demo-lease", "the lease")
	resource := fs.String("resource", "demo-resource", "the fenced resource to write")
	holder := fs.String("holder", fmt.Sprintf("worker (pid %d)", os.Getpid()), "who holds it, for humans")
	ttl := fs.Duration("ttl", 2*time.Second, "lease duration")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for the lease")
	value := fs.String("value", "", "what to write (default: who wrote it, with which token)")
	pause := fs.Bool("pause", false, "after checking the lease, wait for SIGCONT before writing")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(stdout, "[%s] %s\n", *holder, fmt.Sprintf(format, a...))
	}

	var opts []client.Option
	if k := getenv("LEASEKEEPER_API_KEY"); k != "" {
		opts = append(opts, client.WithAPIKey(k))
	}
	c, err := client.New(server, opts...)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return exitUsage
	}
	defer c.Close()
	l, err := c.Acquire(ctx, *name, client.AcquireOptions{Holder: *holder, TTL: *ttl, Wait: *wait})
	if err != nil {
		say("could not get lease %q: %v", *name, err)
		return exitTempFail
	}
	say("acquired lease %q with fencing token %d (ttl %v)", l.Name(), l.Token(), *ttl)

	var resumed chan os.Signal
	if *pause {
		// Listen before announcing the check, so the continue cannot be missed.
		resumed = make(chan os.Signal, 1)
		signal.Notify(resumed, syscall.SIGCONT)
		defer signal.Stop(resumed)
	}
	if err := l.Context().Err(); err != nil {
		say("lease lost before writing: %v", context.Cause(l.Context()))
		return exitFailed
	}
	say("checked: the lease is still mine; writing with token %d", l.Token())
	if *pause {
		select {
		case <-resumed:
		case <-time.After(time.Minute):
			say("was never paused and continued; writing anyway")
		}
		if cause := context.Cause(l.Context()); cause != nil {
			say("resumed; my lease context has ended meanwhile (%v), but I had already checked", cause)
		} else {
			say("resumed")
		}
	}

	// The write deliberately ignores the lease context: it simulates a process that was
	// paused between checking its lease and writing, which is exactly the case no client-side
	// check can close. The server's fencing check is what refuses it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	v := *value
	if v == "" {
		v = fmt.Sprintf("written by %s with token %d\n", *holder, l.Token())
	}
	info, werr := c.PutResource(wctx, *resource, l.Token(), []byte(v), client.PutOptions{Lease: l.Name(), ContentType: "text/plain"})
	rerr := l.Release(wctx)
	var stale *client.StaleTokenError
	switch {
	case errors.As(werr, &stale):
		say("write REFUSED by the server: stale_token (presented %d, current fence %d)", stale.PresentedToken, stale.CurrentFence)
	case werr != nil:
		say("write failed: %v", werr)
	default:
		say("write accepted: %q fence %d version %d", info.Resource, info.Fence, info.Version)
	}
	switch {
	case errors.Is(rerr, client.ErrLeaseLost):
		say("release: the lease had already been lost (%v)", rerr)
	case rerr != nil:
		say("release failed: %v", rerr)
	default:
		say("released lease %q", l.Name())
	}
	switch {
	case stale != nil:
		return exitStale
	case werr != nil:
		return exitFailed
	}
	return exitWritten
}
