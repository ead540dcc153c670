package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// lockCommand is `leasekeeper lock NAME…`: it acquires the lease (of several names, all or
// none), prints the grants, and holds them (renewing them, following them on the watch stream)
// until interrupted, then releases them, as `etcdctl lock NAME` without a command does. A lost
// lease ends it with exLeaseLost: the leases of several names end together.
func lockCommand(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	lf := addLeaseFlags(cf.fs, getenv, "lease duration; renewed at a third of it")
	sf := addSessionFlags(cf.fs, getenv, true)
	names, err := cf.parseAll(args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return &exitError{code: 2, err: errors.New("lock: a lease name is required (several: all or none)")}
	}
	c, ls, giveBack, err := lf.hold(ctx, cf, names, sf, stderr, nil)
	switch {
	case ctx.Err() != nil && err != nil:
		return nil // interrupted while waiting: nothing to give back
	case err != nil:
		return err
	}
	defer c.Close()
	for _, l := range ls {
		if err := writeGrant(stdout, l, cf.json); err != nil {
			release(context.WithoutCancel(ctx), "lock", l.Name(), giveBack, stderr)
			return err
		}
	}
	// The contexts of several leases end together: the first's tells for all.
	return holdUntilDone(ctx, "lock", ls[0], giveBack, stderr)
}

// electCommand is `leasekeeper elect NAME PROPOSAL`: it campaigns as PROPOSAL, prints a line
// when it leads, and leads until interrupted, then resigns, as `etcdctl elect` does. A lost
// term ends it with exLeaseLost. With --listen it only prints the leaders, as `etcdctl elect -l`.
func electCommand(ctx context.Context, cf *clientFlags, args []string, stdout, stderr io.Writer) error {
	ttl := duration(cf.fs, "ttl", 30*time.Second, "lease duration of a term; renewed at a third of it")
	metadata := cf.fs.String("metadata", "", "a JSON object published with the term (an address, say)")
	listen := cf.fs.Bool("listen", false, "only print the leader and every change of leader, without campaigning")
	rest, err := cf.parseAll(args)
	if err != nil {
		return err
	}
	switch {
	case *listen && len(rest) != 1:
		return &exitError{code: 2, err: fmt.Errorf("elect --listen: one election name expected, got %q", rest)}
	case !*listen && len(rest) != 2:
		return &exitError{code: 2, err: fmt.Errorf("elect: an election name and a proposal expected, got %q", rest)}
	}
	md, err := parseMetadata(*metadata)
	if err != nil {
		return err
	}
	c, err := cf.client(stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	if *listen {
		return watchLeader(ctx, c, rest[0], cf.json, stdout)
	}
	e := c.NewElection(rest[0], client.ElectionOptions{Candidate: rest[1], TTL: *ttl, Metadata: md})
	l, err := e.Campaign(ctx)
	switch {
	case ctx.Err() != nil:
		return nil // interrupted before leading: nothing to give back
	case err != nil:
		return cf.fail(err)
	}
	v := leaderView{Name: e.Name(), Leading: true, Holder: l.Holder(), Token: l.Token(), Metadata: md}
	if err := v.write(stdout, cf.json); err != nil {
		release(context.WithoutCancel(ctx), "elect", e.Name(), e.Resign, stderr)
		return err
	}
	return holdUntilDone(ctx, "elect", l, e.Resign, stderr)
}

// holdUntilDone keeps l until ctx ends (Ctrl-C), then gives it back with giveBack; a lease
// lost before that is exLeaseLost.
func holdUntilDone(ctx context.Context, cmd string, l *client.Lease, giveBack func(context.Context) error, stderr io.Writer) error {
	select {
	case <-ctx.Done():
	case <-l.Context().Done():
	}
	lost := context.Cause(l.Context()) // before the release, whose own cause would hide it
	rerr := release(context.WithoutCancel(ctx), cmd, l.Name(), giveBack, stderr)
	switch {
	case lost != nil:
		return &exitError{code: exLeaseLost, err: fmt.Errorf("%s: lease %q (token %d) was lost: %w", cmd, l.Name(), l.Token(), lost)}
	case errors.Is(rerr, client.ErrLeaseLost):
		return &exitError{code: exLeaseLost, err: fmt.Errorf("%s: lease %q (token %d) had ended before it was given back: %w", cmd, l.Name(), l.Token(), rerr)}
	}
	return nil
}
