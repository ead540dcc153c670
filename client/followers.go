package client

import (
	"context"
	"strings"
	"sync"
)

// followers shares one watch stream among all the kept-alive leases of a Client, instead of
// one stream each: the server bounds the streams open at once (serve --max-watchers, default
// 1000, and --max-watchers-per-key, default 100), and a process may hold more leases than that. The stream watches the
// longest common prefix of the leases' names, widened (by reconnecting, resuming after the
// last event seen) when a lease outside it joins; each event goes to the leases of its name.
// It runs while some lease follows it.
type followers struct {
	c *Client

	mu      sync.Mutex
	byName  map[string]map[*Lease]struct{}
	prefix  string             // what the stream watches: a prefix of every name in byName
	gen     int                // counts the streams started, so that an old one's end changes nothing
	running bool               // a stream of generation gen runs
	stop    context.CancelFunc // ends it
	conn    context.CancelFunc // ends its current connection, to reconnect with a wider prefix
	open    bool               // its current connection is open and has read the states of byName
}

// join makes the stream tell l about its name's events, starting the stream if none runs.
// It reports whether l must read its name's state itself: true when the stream was already
// open (false when the stream's next opening reads it).
func (f *followers) join(l *Lease) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byName == nil {
		f.byName = map[string]map[*Lease]struct{}{}
	}
	if f.byName[l.name] == nil {
		f.byName[l.name] = map[*Lease]struct{}{}
	}
	f.byName[l.name][l] = struct{}{}
	switch {
	case !f.running:
		f.gen++
		gen := f.gen
		ctx, cancel := context.WithCancel(context.Background())
		f.prefix, f.running, f.stop, f.conn, f.open = f.commonPrefixLocked(), true, cancel, nil, false
		if err := f.c.goBackground(func() { f.run(ctx, gen) }); err != nil {
			cancel() // the client is closed: the lease's context has ended with ErrClosed
			f.running = false
		}
		return false
	case !strings.HasPrefix(l.name, f.prefix):
		f.prefix, f.open = f.commonPrefixLocked(), false
		if f.conn != nil {
			f.conn()
		}
		return false
	}
	return f.open
}

// leave stops telling l about events; the stream stops with its last follower.
func (f *followers) leave(l *Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byName[l.name], l)
	if len(f.byName[l.name]) == 0 {
		delete(f.byName, l.name)
	}
	if len(f.byName) == 0 && f.running {
		f.stop()
		f.running, f.conn, f.open = false, nil, false
	}
}

// commonPrefixLocked returns the longest common prefix of the followed names. f.mu is held.
func (f *followers) commonPrefixLocked() string {
	first, prefix := true, ""
	for name := range f.byName {
		if first {
			first, prefix = false, name
			continue
		}
		n := 0
		for n < len(prefix) && n < len(name) && prefix[n] == name[n] {
			n++
		}
		prefix = prefix[:n]
	}
	return prefix
}

// leasesLocked returns the followers of name. f.mu is held.
func (f *followers) leasesLocked(name string) []*Lease {
	out := make([]*Lease, 0, len(f.byName[name]))
	for l := range f.byName[name] {
		out = append(out, l)
	}
	return out
}

// run is the stream of generation gen, until ctx ends (no follower left), the client closes,
// or the server refuses it for good (then renewals alone guard the leases, and the next lease
// to join starts another).
func (f *followers) run(ctx context.Context, gen int) {
	conn := func(ctx context.Context) (string, context.Context, context.CancelFunc) {
		cctx, cancel := context.WithCancel(ctx)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gen == gen {
			f.conn, f.open = cancel, false
		}
		return f.prefix, cctx, cancel
	}
	// Each time the stream opens, before its events, every follower reads its state: an end
	// between two connections is not missed either.
	opened := func() error {
		f.mu.Lock()
		var ls []*Lease
		if f.gen == gen {
			f.open = true
			for name := range f.byName {
				ls = append(ls, f.leasesLocked(name)...)
			}
		}
		f.mu.Unlock()
		for _, l := range ls {
			l.checkState()
		}
		return nil
	}
	err := f.c.follow(ctx, conn, opened, func(e Event) error {
		f.mu.Lock()
		ls := f.leasesLocked(e.Name)
		f.mu.Unlock()
		for _, l := range ls {
			l.see(e)
		}
		return nil
	})
	f.mu.Lock()
	if f.gen == gen {
		f.running, f.conn, f.open = false, nil, false
	}
	f.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		f.c.log.Warn("the watch stream of the kept-alive leases stopped; renewals alone guard them", "err", err)
	}
}
