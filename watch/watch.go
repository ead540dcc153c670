// Package watch streams committed events to watchers as Server-Sent Events. Watchers read the
// events table from their own position, woken by a broadcast when something commits, so a
// slow watcher only falls behind itself: the writers never wait for it. A watcher whose
// connection does not take a write within the write timeout is dropped.
package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wire"
)

// Store is what watchers need of the store.
type Store interface {
	Events(ctx context.Context, f store.EventFilter) (store.Page[lease.Event], error)
	LatestSeq(ctx context.Context) (int64, error)
}

// Options tune the hub; zero values take the defaults.
type Options struct {
	MaxWatchers int // default 1000
	// AdminReserve is how many streams beyond MaxWatchers only admins may open (OpenAs), so
	// that a server full of other keys' streams still lets its operator watch. Default 0.
	AdminReserve int
	Heartbeat    time.Duration // default 15 s
	WriteTimeout time.Duration // default 10 s
	// Encode is the encoder of streams served with a nil one (default: the event's wire form,
	// wire.Event): the hub encodes each recent event once, for all of them, instead of once
	// per watcher.
	Encode Encoder
	// Coalesce is the least time between two writes to one watcher (default 20 ms): events
	// committed meanwhile go out together, so a watcher costs a bounded number of wake-ups and
	// writes a second, however many commits there are.
	Coalesce time.Duration
	// WriteBudget bounds the writes a second to all watchers together (default 5,000): with
	// many watchers each one's interval stretches to watchers/WriteBudget (1,000 watchers:
	// 200 ms), so their cost to the writers stays bounded while each still sees every event,
	// in order, a little later. Heartbeats are not counted.
	WriteBudget int
	// OnDeliver, when set with Clock, is told after each write to a stream how old the oldest
	// event in it was (Clock's now at the write less the event's time): how far watchers lag.
	// Once a write, not once an event, so its cost is bounded by Coalesce whatever the commit
	// rate. Only events committed after the stream opened count: history replayed after a
	// Last-Event-ID is not lag.
	OnDeliver func(age time.Duration)
	// Clock is the clock events are stamped by (the store's).
	Clock lease.Clock
}

// Hub wakes watchers when events commit and bounds how many there are.
type Hub struct {
	store Store
	opts  Options

	mu       sync.RWMutex
	watchers int
	// The streams being served, by the prefix they watch, and how many prefixes of each length
	// there are: a commit wakes only the streams whose prefix starts one of its events' names,
	// found by looking up each such name's prefixes of those lengths, so that a thousand
	// watchers of a lease each are not all woken by every commit.
	byPrefix map[string]map[*Stream]struct{}
	lens     map[int]int
	// evicted holds, for each watched prefix, the seq of the newest event of that prefix that
	// has left the ring (or the horizon when the prefix was first watched): a stream further
	// behind than the horizon still reads from memory when nothing of its prefix left since
	// its position, as a watcher of a quiet lease, not woken by others' commits, always is.
	evicted map[string]int64
	// mine holds, for each watched prefix, the positions in the ring of its events, oldest
	// first: a stream reads only its own events, not every event committed since its last
	// write (with 1,000 watchers of a lease each, woken at their write interval, that scan
	// was most of what watching cost). At most recentCap positions per watched prefix.
	mine   map[string]*positions
	woken  []string      // scratch of wake
	closed chan struct{} // closed by Close: every stream ends
	once   sync.Once

	// The newest committed events, so watchers that keep up are served from memory instead
	// of each querying the store after every commit: a ring of recentCap events, the oldest at
	// recent[start], n of them. Every event with seq > horizon is in the ring; horizon is -1
	// until the first commit is observed.
	recent   []lease.Event
	frames   [][]byte // recent[i] as a stream message, by opts.Encode; nil if not encoded
	start, n int
	next     int64 // the position of the next event: position p is at recent[p%recentCap]
	horizon  int64
	first    int64 // the horizon when the first commit was observed: no older event was ever in memory
}

// recentCap bounds the events kept in memory; a watcher further behind reads the store.
const recentCap = 4096

// NewHub returns a hub over the store.
func NewHub(st Store, opts Options) *Hub {
	if opts.MaxWatchers == 0 {
		opts.MaxWatchers = 1000
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.Coalesce == 0 {
		opts.Coalesce = 20 * time.Millisecond
	}
	if opts.WriteBudget == 0 {
		opts.WriteBudget = 5000
	}
	if opts.Encode == nil {
		opts.Encode = func(e lease.Event) any { return wire.Event(e) }
	}
	return &Hub{store: st, opts: opts, closed: make(chan struct{}), horizon: -1, byPrefix: map[string]map[*Stream]struct{}{}, lens: map[int]int{},
		evicted: map[string]int64{}, mine: map[string]*positions{}}
}

// positions are a watched prefix's events in the ring, by position, oldest first.
type positions struct {
	at   []int64
	head int // at[:head] have left the ring
}

func (p *positions) push(pos int64) { p.at = append(p.at, pos) }

// drop forgets the oldest position when it is pos, which has just left the ring.
func (p *positions) drop(pos int64) {
	if p.head < len(p.at) && p.at[p.head] == pos {
		p.head++
	}
	if p.head >= 64 && 2*p.head >= len(p.at) {
		p.at = append(p.at[:0], p.at[p.head:]...)
		p.head = 0
	}
}

func (p *positions) live() []int64 { return p.at[p.head:] }

// ObserveEvents keeps the events and wakes the watchers of their names; wire it to the store's
// commit hook. It never blocks.
func (h *Hub) ObserveEvents(evs []lease.Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.horizon < 0 {
		h.horizon = evs[0].Seq - 1
		h.first = h.horizon
		h.recent, h.frames = make([]lease.Event, recentCap), make([][]byte, recentCap)
	}
	// Each event overwrites the oldest once the ring is full: no copy of the window.
	woken := h.woken[:0]
	for _, e := range evs {
		if h.n < recentCap {
			h.n++
		} else {
			old, pos := h.recent[h.start], h.next-recentCap
			h.watchedPrefixes(old.Name, func(p string) {
				h.evicted[p] = old.Seq
				h.mine[p].drop(pos)
			})
			h.start = (h.start + 1) % recentCap
		}
		i := h.next % recentCap
		h.recent[i], h.frames[i] = e, nil
		if h.watchers > 0 && h.opts.Encode != nil {
			h.frames[i], _ = message(e, h.opts.Encode)
		}
		pos := h.next
		h.next++
		h.watchedPrefixes(e.Name, func(p string) {
			h.mine[p].push(pos)
			if !slices.Contains(woken, p) {
				woken = append(woken, p)
			}
		})
	}
	if h.n == recentCap {
		h.horizon = h.at(0).Seq - 1
	}
	// Wake every stream that watches one of evs' names, once.
	for _, p := range woken {
		for st := range h.byPrefix[p] {
			select {
			case st.wake <- struct{}{}:
			default: // already signalled: it reads every event when it runs
			}
		}
	}
	clear(woken)
	h.woken = woken[:0]
}

// watchedPrefixes calls f with each watched prefix that name starts with, looking up only the
// lengths some stream watches. h.mu must be held.
func (h *Hub) watchedPrefixes(name string, f func(prefix string)) {
	for n := range h.lens {
		if n <= len(name) {
			if _, ok := h.byPrefix[name[:n]]; ok {
				f(name[:n])
			}
		}
	}
}

// at returns the i-th oldest event of the ring. h.mu must be held.
func (h *Hub) at(i int) *lease.Event { return &h.recent[(h.start+i)%recentCap] }

// message is the stream message of e.
func message(e lease.Event, encode Encoder) ([]byte, error) {
	data, err := json.Marshal(encode(e))
	if err != nil {
		return nil, fmt.Errorf("encode event %d: %w", e.Seq, err)
	}
	return fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data), nil
}

// fromMemory visits, under the hub's read lock and in order, the events after seq whose names
// start with prefix, each with its message when the hub has encoded it (nil otherwise), and
// returns the newest seq it looked at (so a watcher of a quiet prefix keeps up with the others)
// and true, when memory holds all of them; otherwise it visits nothing and the caller reads the
// store. Nothing is copied out of the ring: with a thousand watchers of every event, copying
// each one's events into a slice of its own was a fifth of the server's CPU, most of it the
// garbage collector's.
func (h *Hub) fromMemory(after int64, prefix string, visit func(e *lease.Event, msg []byte) error) (int64, bool, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.horizon < 0 {
		return after, false, nil
	}
	if after < h.horizon {
		// Older events have left the ring: none of them is this stream's if none of its
		// prefix left after its position.
		if ev, ok := h.evicted[prefix]; !ok || ev > after || after < h.first {
			return after, false, nil
		}
		after = h.horizon
	}
	if mine, ok := h.mine[prefix]; ok {
		// A watched prefix: only its own events, found by their positions.
		live := mine.live()
		for _, pos := range live[sort.Search(len(live), func(i int) bool { return h.recent[live[i]%recentCap].Seq > after }):] {
			if err := visit(&h.recent[pos%recentCap], h.frames[pos%recentCap]); err != nil {
				return after, true, err
			}
		}
	} else {
		i := sort.Search(h.n, func(i int) bool { return h.at(i).Seq > after })
		for ; i < h.n; i++ {
			if e := h.at(i); strings.HasPrefix(e.Name, prefix) {
				if err := visit(e, h.frames[(h.start+i)%recentCap]); err != nil {
					return after, true, err
				}
			}
		}
	}
	if h.n > 0 && h.at(h.n-1).Seq > after {
		after = h.at(h.n - 1).Seq
	}
	return after, true, nil
}

// Close ends every open stream and refuses new ones, so a shutting-down server is not held
// up by watchers. It is safe to call more than once.
func (h *Hub) Close() { h.once.Do(func() { close(h.closed) }) }

// Limit returns how many streams may be open at once (Options.MaxWatchers).
func (h *Hub) Limit() int { return h.opts.MaxWatchers }

// Watchers returns how many streams are open.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watchers
}

// Stream is one watcher's stream, ready to be served.
type Stream struct {
	hub    *Hub
	ctx    context.Context
	prefix string
	after  int64
	live   int64         // the newest seq when the stream opened: later events count for OnDeliver
	wake   chan struct{} // signalled when an event of its prefix commits

	// Keep, when set before Serve, decides which events the watcher may see; the others are
	// skipped (the stream's position still moves past them).
	Keep func(lease.Event) bool
}

// Open reserves a watcher slot and fixes where the stream starts: after the seq in
// Last-Event-ID, or at the newest event. Codes: too_many_watchers, invalid_request.
// The caller must Serve the stream, which frees the slot.
func (h *Hub) Open(ctx context.Context, prefix, lastEventID string) (*Stream, error) {
	return h.OpenAs(ctx, prefix, lastEventID, false)
}

// OpenAs is Open for a caller that is an admin, or not: an admin may also take one of the
// AdminReserve slots beyond MaxWatchers.
func (h *Hub) OpenAs(ctx context.Context, prefix, lastEventID string, admin bool) (*Stream, error) {
	var after int64
	if lastEventID != "" {
		var err error
		if after, err = strconv.ParseInt(lastEventID, 10, 64); err != nil || after < 0 {
			return nil, lease.Errorf(lease.CodeInvalid, "Last-Event-ID %q is not an event seq", lastEventID)
		}
	}
	live, err := h.store.LatestSeq(ctx)
	if err != nil {
		return nil, err
	}
	if lastEventID == "" {
		after = live
	}
	select {
	case <-h.closed:
		return nil, lease.Errorf(lease.CodeUnavailable, "the server is shutting down")
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	limit := h.opts.MaxWatchers
	if admin {
		limit += h.opts.AdminReserve
	}
	if h.watchers >= limit {
		return nil, lease.Errorf(lease.CodeTooManyWatchers, "%d watchers are connected, the most this server allows", h.watchers)
	}
	h.watchers++
	return &Stream{hub: h, ctx: ctx, prefix: prefix, after: after, live: live, wake: make(chan struct{}, 1)}, nil
}

// register makes commits of s's prefix wake s.
func (h *Hub) register(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPrefix[s.prefix] == nil {
		h.byPrefix[s.prefix] = map[*Stream]struct{}{}
		h.evicted[s.prefix] = h.horizon // what left the ring before is unknown: as if all of it
		// The prefix's events already in the ring, found once; ObserveEvents adds the others.
		mine := &positions{}
		for pos := h.next - int64(h.n); pos < h.next; pos++ {
			if strings.HasPrefix(h.recent[pos%recentCap].Name, s.prefix) {
				mine.push(pos)
			}
		}
		h.mine[s.prefix] = mine
	}
	h.byPrefix[s.prefix][s] = struct{}{}
	h.lens[len(s.prefix)]++
}

// unregister forgets s and frees its watcher slot.
func (h *Hub) unregister(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers--
	if delete(h.byPrefix[s.prefix], s); len(h.byPrefix[s.prefix]) == 0 {
		delete(h.byPrefix, s.prefix)
		delete(h.evicted, s.prefix)
		delete(h.mine, s.prefix)
	}
	if h.lens[len(s.prefix)]--; h.lens[len(s.prefix)] == 0 {
		delete(h.lens, len(s.prefix))
	}
}

// Encoder turns an event into its JSON form on the stream.
type Encoder func(lease.Event) any

// Serve writes the stream until the client leaves, a write times out, or the store fails.
//
// With a nil encode, the stream uses the hub's Options.Encode and the messages it keeps.
func (s *Stream) Serve(w http.ResponseWriter, encode Encoder) error {
	shared := encode == nil
	if shared {
		encode = s.hub.opts.Encode
	}
	s.hub.register(s)
	defer s.hub.unregister(s)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := s.write(w, rc, []byte("retry: 2000\n\n")); err != nil {
		return err
	}
	heartbeat := time.NewTicker(s.hub.opts.Heartbeat)
	defer heartbeat.Stop()
	var buf bytes.Buffer
	var last time.Time
	var oldest time.Time // of the live events in buf, for OnDeliver; zero if none
	// add appends e's message to buf; it runs under the hub's read lock, so it only copies
	// (or, for a stream's own encoder, encodes).
	add := func(e *lease.Event, msg []byte) error {
		if s.Keep != nil && !s.Keep(*e) {
			s.after = e.Seq
			return nil
		}
		if msg == nil || !shared {
			var err error
			if msg, err = message(*e, encode); err != nil {
				return err
			}
		}
		buf.Write(msg)
		s.after = e.Seq
		if e.Seq > s.live && (oldest.IsZero() || e.At.Before(oldest)) {
			oldest = e.At
		}
		return nil
	}
	for {
		// A commit after this read leaves a signal in s.wake, so none is missed.
		for {
			seen, caughtUp, err := s.hub.fromMemory(s.after, s.prefix, add)
			if err != nil {
				return err
			}
			if !caughtUp {
				page, err := s.hub.store.Events(s.ctx, store.EventFilter{Prefix: s.prefix, AfterSeq: s.after, Limit: store.MaxLimit})
				if err != nil {
					return err
				}
				caughtUp = page.Next == ""
				for i := range page.Items {
					if err := add(&page.Items[i], nil); err != nil {
						return err
					}
				}
			}
			// One write and one flush for all the events of this wake-up.
			if buf.Len() > 0 {
				if err := s.write(w, rc, buf.Bytes()); err != nil {
					return err
				}
				buf.Reset()
				last = time.Now()
				s.delivered(oldest)
				oldest = time.Time{}
			}
			if caughtUp {
				s.after = max(s.after, seen)
				break
			}
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-s.hub.closed:
			return nil
		case <-s.wake:
			if err := s.pause(last); err != nil {
				return nil
			}
		case <-heartbeat.C:
			if err := s.write(w, rc, []byte(": heartbeat\n\n")); err != nil {
				return err
			}
		}
	}
}

// interval is the least time between two writes to one watcher now: Coalesce, stretched so
// that all the watchers together stay within WriteBudget writes a second.
func (h *Hub) interval() time.Duration {
	h.mu.RLock()
	n := h.watchers
	h.mu.RUnlock()
	return max(h.opts.Coalesce, time.Duration(n)*time.Second/time.Duration(h.opts.WriteBudget))
}

// delivered reports to OnDeliver the age of the oldest live event just written.
func (s *Stream) delivered(oldest time.Time) {
	o := s.hub.opts
	if o.OnDeliver == nil || o.Clock == nil || oldest.IsZero() {
		return
	}
	o.OnDeliver(o.Clock.Now().Sub(oldest))
}

// pause waits out what is left of the coalescing interval since the last write, so that the
// commits of that time are sent together; it returns an error when the stream should end.
func (s *Stream) pause(last time.Time) error {
	d := s.hub.interval() - time.Since(last)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return s.ctx.Err()
	case <-s.hub.closed:
		return errors.New("hub closed")
	case <-t.C:
		return nil
	}
}

// write sends one message and flushes it, dropping the watcher if the client does not take
// it within the write timeout.
func (s *Stream) write(w http.ResponseWriter, rc *http.ResponseController, msg []byte) error {
	rc.SetWriteDeadline(time.Now().Add(s.hub.opts.WriteTimeout))
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("write to watcher: %w", err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush to watcher: %w", err)
	}
	return nil
}
