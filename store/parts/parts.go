// Package parts finds and counts the open grants whose name or holder contains a part, for
// Held's filters ?q= and ?holder= on both backends, without a walk of an index in SQL: a
// Keeper keeps the names and holders of the open grants in memory: the names in a byte string
// that bytes.Index searches, the holders as a dictionary (a server's leases share a few
// holders: a filter on a holder checks each of them once, then reads one number per grant),
// with each entry's token and a bit that says its grant ended since.
//
// It is built and kept by readers, off the write path: the writer knows nothing of it. A
// keeper goroutine, started when the store opens, builds it (from the open grants, a paced
// chunk per statement, up to the last token issued then, its mark, and with the last event
// seq then, its seq), then every second appends the grants opened since (tokens past the mark:
// a token is never reused, tokens grow in commit order, and a grant's name and holder never
// change) and marks those that ended since (the tokens of the released, expired and revoked
// events past its seq: every end of a grant records one in its transaction, and seqs are
// gapless and follow the commits, on both backends); each filter does too before it searches,
// so that it misses none. Both are read in one snapshot (SQL.Round), so that what the index
// holds is the open grants of one moment. Held counts Count's first term in it, whatever the
// number of matches (heldsql.Sift, Query.OpenCounted), finds the first of them after the
// page's key, where the page's walk begins (Query.Bound), and, when at most Held sorts match,
// reads their rows by token (heldsql.Query.Among). The keeper rebuilds it when the grants that
// ended outnumber the open ones, and when events it had not read were pruned (an end may then
// be unmarked: it counts nothing until rebuilt). It never drops it: the first filter after a
// drop would sieve for the seconds of a build (docs/DESIGN.md). Until it is built, when more
// grants or events than a filter reads came since the keeper's last pass, and for a filter on
// a state, Held sieves or counts in SQL.
//
// What differs between the backends is the SQL (see SQL).
package parts

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// SQL is a backend's statements of the index, and how it reads them.
type SQL struct {
	// Marks reads the last token issued and the last event seq, in one snapshot.
	Marks string
	// After reads the next chunk of the open grants' token, name and holder for a build, after
	// the last row read, in an order that AfterArgs's key continues; AfterArgs gives its
	// arguments: the key of the last row read (zero values first) and the chunk's size.
	After     string
	AfterArgs func(name, holder []byte, token, chunk int64) []any
	// Since reads the open grants' token, name and holder past a token, in order of token, at
	// most a chunk: arguments the token and the chunk's size.
	Since string
	// Seqs reads the newest event seq ever given and the oldest kept (0 for none).
	Seqs string
	// Ends reads the tokens of the grants that ended in the events of seqs in (from, to].
	Ends string
	// Round is how a round's read transaction begins: one snapshot for both its statements.
	Round *sql.TxOptions
	// Wrap adds the backend's context to a database error.
	Wrap func(error) error
}

// source is a database and its SQL.
type source struct {
	r *sql.DB
	q SQL
}

// w is q.Wrap(err).
func (q *SQL) w(err error) error {
	if err == nil || q.Wrap == nil {
		return err
	}
	return q.Wrap(err)
}

// Keeper keeps the index of parts for a store (see the package comment).
type Keeper struct {
	mode   Mode
	Chunk  int           // TailChunk but in tests
	Events int           // EndsChunk but in tests
	Every  time.Duration // Every but in tests
	Slack  int           // how many more ended grants than open ones a rebuild waits for, besides
	Room   int           // Index.room
	src    source
	log    *slog.Logger
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	OnSwap func() // called when the keeper has put a new build in place (tests)
	// AfterChunk, when set, is called after each chunk of a paced build but the last, before
	// it looks for writes; Paused, when set, is told each pause instead of waiting (tests).
	AfterChunk func()
	Paused     func(time.Duration)

	mu      sync.Mutex
	idx     *Index // nil until built
	keeping bool   // a keeper runs
}

// Index is one build of the parts' index and the grants appended and ended since.
type Index struct {
	grow sync.Mutex // held by whoever catches up: one reader of the tail at a time

	mu        sync.RWMutex
	names     []byte            // each entry followed by a 0 byte
	nameEnd   []uint32          // nameEnd[i]: the offset of entry i's 0 byte in names
	holderOf  []uint32          // holderOf[i]: entry i's holder, in the dictionary
	holders   []byte            // the dictionary: each holder followed by a 0 byte
	holderEnd []uint32          // holderEnd[h]: the offset of holder h's 0 byte in holders
	holderID  map[string]uint32 // the dictionary's holders, up to DictMost of them
	tokens    []int64
	built     int      // the entries of the build, in SQL.After's order; those after it came in order of token
	byToken   []uint32 // the build's entries in order of token, to find an entry whose grant ended
	ended     bits     // bit i: the grant of entry i ended
	nEnded    int      // how many bits of ended are set
	mark      int64    // every open grant up to this token is in the index
	seq       int64    // every end recorded up to this event seq is marked
	blind     bool     // events past seq were pruned unread: it counts nothing
	room      int      // the most bytes of names, or of holders: 4 GiB, its offsets' (less in tests)
	full      bool     // its names or holders outgrew room: it answers nothing
}

const (
	// TailChunk is the most grants one statement reads past the mark, and the most a filter
	// reads before it leaves them to the keeper and sieves in SQL.
	TailChunk = 10_000
	// EndsChunk is the most events (by seq) one statement reads past the seq for ends, and
	// the most a filter reads before it leaves them to the keeper and counts in SQL: about a
	// second of a busy server's events (acquires, renewals and ends), the keeper's pass.
	EndsChunk = 20_000
	// Every is how often the keeper catches up.
	Every = time.Second
	// DictMost is the most holders the dictionary looks up: past them (holders that are
	// each a grant's own), a new holder is added again for each of its grants, as the names
	// are, and the map stops growing.
	DictMost = 1 << 16
)

// Mode is how Held finds the grants whose name or holder contains a part (Options.HeldParts).
type Mode int

const (
	// Background keeps the index of parts, built in the background from the store's
	// open; until it is ready, Held sieves or counts in SQL.
	Background Mode = iota
	// AtOnce builds, catches up and rebuilds the index in the call that needs it, so that
	// every filter reads it: for tests.
	AtOnce
	// Never always sieves or counts in SQL, keeping no index.
	Never
)

// New is a Keeper of the open grants that r reads with q, in mode; Start starts it.
func New(mode Mode, r *sql.DB, q SQL, log *slog.Logger) *Keeper {
	ctx, cancel := context.WithCancel(context.Background())
	return &Keeper{mode: mode, Chunk: TailChunk, Events: EndsChunk, Every: Every, Slack: 4096, Room: math.MaxUint32,
		src: source{r, q}, log: log, ctx: ctx, cancel: cancel}
}

// SetMode sets the mode while no Held runs (benchmarks).
func (p *Keeper) SetMode(mode Mode) { p.mode = mode }

// Start starts the keeper (Background), once the store's schema is in place.
func (p *Keeper) Start() {
	if p.mode == Background {
		p.use()
	}
}

// Close stops the keeper and waits for it.
func (p *Keeper) Close() {
	p.cancel()
	p.wg.Wait()
}

// Answer is what the index of parts answers for a filter: the tokens of the open grants
// that pass its filters on name and holder when listed (at most as many as asked for), and how
// many of them are no semaphore's slot when counted (Count's first term).
type Answer struct {
	Tokens  []int64
	Listed  bool
	Open    int
	Counted bool
	// Bounded says that First and FirstToken are the name and token of the first grant, in
	// the page's order, that passes the filters after the page's key (Query.Bound).
	Bounded    bool
	First      string
	FirstToken int64
}

// Apply is q with what a tells before its count: the tokens of the open grants that pass its
// filters on name and holder when listed (Among: the count and the page read those rows
// alone, each a look-up by token), else their count when counted (OpenCounted) and where the
// page's walk begins when bounded (Bound); answered says that a told the tokens or the count.
func (a Answer) Apply(q heldsql.Query) (_ heldsql.Query, answered bool) {
	if a.Listed {
		tokens := make([]string, len(a.Tokens))
		for i, t := range a.Tokens {
			tokens[i] = strconv.FormatInt(t, 10)
		}
		return q.Among("[" + strings.Join(tokens, ",") + "]"), true
	}
	if a.Counted {
		q, answered = q.OpenCounted(a.Open), true
	}
	if a.Bounded {
		q = q.Bound(a.First, a.FirstToken)
	}
	return q, answered
}

// Sift answers s from the index: nothing when it is not ready or more grants opened since its
// last catch-up than a filter reads, no count when more events came since than a filter reads,
// when events were pruned unread, or when s does not count (a filter on a state).
func (p *Keeper) Sift(ctx context.Context, s heldsql.Sift, most int) (Answer, error) {
	switch p.mode {
	case Never:
		return Answer{}, nil
	case AtOnce:
		return p.siftAtOnce(ctx, s, most)
	}
	x := p.use()
	if x == nil {
		return Answer{}, nil
	}
	opened, ended, err := x.catchUp(ctx, &p.src, p.Chunk, p.Events, 1)
	if err != nil || !opened {
		return Answer{}, err
	}
	return x.sift(s, most, ended), nil
}

// siftAtOnce is sift with every step in the call (AtOnce).
func (p *Keeper) siftAtOnce(ctx context.Context, s heldsql.Sift, most int) (Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x, _, err := p.keptUp(ctx, p.idx, false)
	if err != nil {
		return Answer{}, err
	}
	p.idx = x
	return x.sift(s, most, true), nil
}

// use is the index when it is built, else nil; it starts the keeper when none runs.
func (p *Keeper) use() *Index {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.keeping && p.ctx.Err() == nil {
		p.keeping = true
		p.wg.Add(1)
		go p.keep()
	}
	return p.idx
}

// Built is the index when it is built, else nil, without starting a keeper (tests).
func (p *Keeper) Built() *Index {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idx
}

// Keeping reports whether a keeper runs (tests).
func (p *Keeper) Keeping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keeping
}

// Pass is one of the keeper's passes, run by the caller (tests).
func (p *Keeper) Pass() error { return p.pass(p.Built()) }

// Build builds an index, paced, and drops it, as the keeper's build does (benchmarks, tests).
func (p *Keeper) Build(ctx context.Context) error {
	_, err := build(ctx, &p.src, p.Chunk, math.MaxUint32, p.pace)
	return err
}

// Len is how many entries x has, those of ended grants too (tests).
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.tokens)
}

// keep builds the index, then keeps it (see parts) until the store closes.
func (p *Keeper) keep() {
	defer p.wg.Done()
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	for p.ctx.Err() == nil {
		p.mu.Lock()
		x := p.idx
		p.mu.Unlock()
		if err := p.pass(x); err != nil && p.ctx.Err() == nil {
			p.log.Warn("the index of the parts of names", "err", err)
		}
		select {
		case <-p.ctx.Done():
		case <-tick.C:
		}
	}
}

// pass is one of the keeper's (see keptUp).
func (p *Keeper) pass(x *Index) error {
	began := time.Now()
	y, built, err := p.keptUp(p.ctx, x, true)
	if err != nil || !built {
		return err
	}
	p.log.Info("built the index of the parts of names", "grants", len(y.tokens),
		"bytes", len(y.names)+len(y.holders)+16*len(y.tokens)+4*len(y.holderEnd)+4*len(y.byToken)+8*len(y.ended), "took", time.Since(began))
	p.mu.Lock()
	p.idx = y
	p.mu.Unlock()
	if p.OnSwap != nil {
		p.OnSwap()
	}
	return nil
}

// keptUp is x with the grants opened and ended since, or a new build (built) when x is nil or
// stale, paced when pace.
func (p *Keeper) keptUp(ctx context.Context, x *Index, pace bool) (_ *Index, built bool, err error) {
	if x != nil {
		if _, _, err := x.catchUp(ctx, &p.src, p.Chunk, p.Events, -1); err != nil || !p.stale(x) {
			return x, false, err
		}
	}
	var paced pacer
	if pace {
		paced = p.pace
	}
	if x, err = build(ctx, &p.src, p.Chunk, p.Room, paced); err != nil {
		return nil, false, err
	}
	if _, _, err = x.catchUp(ctx, &p.src, p.Chunk, p.Events, -1); err != nil {
		return nil, false, err
	}
	return x, true, nil
}

// stale reports whether x needs a rebuild: the grants that ended outnumber the open ones in it
// (and slack more), or events it had not read were pruned.
func (p *Keeper) stale(x *Index) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.blind || x.nEnded > len(x.tokens)-x.nEnded+p.Slack
}

// pacer paces a build after a chunk whose read took took, given the marks the chunk before
// saw (see Keeper.pace).
type pacer func(ctx context.Context, took time.Duration, marks *[2]int64) error

// partsPause is how many times the time it took to read a chunk the keeper's build waits
// before the next, while the database takes writes: a build at a million reads for ~1.5 s,
// and without pauses it took a core of two from the writer's commits while it ran (acquires
// halved, BenchmarkPartsBesideAcquire).
const partsPause = 3

// pace is how the keeper's build paces itself after a chunk whose read took took: it waits
// partsPause times that when the database took writes since the chunk before (the last token
// issued or the last event seq moved from marks, the build's own at first, then what the
// chunk before saw), and reads on at once otherwise: a start's build, before clients come
// back, is done in a third of the time, the seconds in which a filter on a part sieves in SQL.
func (p *Keeper) pace(ctx context.Context, took time.Duration, marks *[2]int64) error {
	if p.AfterChunk != nil {
		p.AfterChunk()
	}
	var now [2]int64
	if err := p.src.r.QueryRowContext(ctx, p.src.q.Marks).Scan(&now[0], &now[1]); err != nil {
		return fmt.Errorf("index the parts of names: %w", p.src.q.w(err))
	}
	moved := now != *marks
	*marks = now
	if !moved {
		return nil
	}
	wait := partsPause * took
	if p.Paused != nil {
		p.Paused(wait)
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// build reads every open grant's name and holder, chunk at a time in SQL.After's order, each
// chunk a statement of its own (no read transaction holds the WAL), paced by pace after each
// chunk but the last (nil: unpaced). The last token issued and the last event seq, read
// together before the first chunk, are its mark and its seq: a grant past the mark that the
// walk meets is left to catchUp; one up to it is in its chunk if it is still open then (its
// name and holder, so its place in the index, never change), and if it ends after, its end's
// event is past the seq.
func build(ctx context.Context, src *source, chunk, room int, pace pacer) (*Index, error) {
	x := &Index{room: room}
	if err := src.r.QueryRowContext(ctx, src.q.Marks).Scan(&x.mark, &x.seq); err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", src.q.w(err))
	}
	var after partKey
	marks := [2]int64{x.mark, x.seq}
	for {
		began := time.Now()
		rows, err := src.r.QueryContext(ctx, src.q.After, src.q.AfterArgs(after.name, after.holder, after.token, int64(chunk))...)
		if err != nil {
			return nil, fmt.Errorf("index the parts of names: %w", src.q.w(err))
		}
		var read Index
		n, err := read.scan(rows, x.mark, &after)
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("index the parts of names: %w", src.q.w(err))
		}
		x.merge(&read, partEnds{seq: x.seq})
		if n < chunk {
			break
		}
		if pace != nil {
			if err := pace(ctx, time.Since(began), &marks); err != nil {
				return nil, err
			}
		}
	}
	x.sortBuilt()
	return x, nil
}

// sortBuilt orders the build's entries by token in byToken.
func (x *Index) sortBuilt() {
	x.built = len(x.tokens)
	type entry struct {
		token int64
		i     uint32
	}
	by := make([]entry, x.built)
	for i, t := range x.tokens {
		by[i] = entry{t, uint32(i)}
	}
	slices.SortFunc(by, func(a, b entry) int { return cmp.Compare(a.token, b.token) })
	x.byToken = make([]uint32, x.built)
	for k, e := range by {
		x.byToken[k] = e.i
	}
}

// partKey is the key of the last row a build read (SQL.AfterArgs).
type partKey struct {
	name, holder []byte
	token        int64
}

// catchUp appends the open grants past the mark and marks the grants that ended in events
// past the seq, in rounds (-1: until none is left); opened and ended say that none is left
// of each.
func (x *Index) catchUp(ctx context.Context, src *source, chunk, events, rounds int) (opened, ended bool, err error) {
	x.grow.Lock()
	defer x.grow.Unlock()
	for ; rounds != 0; rounds-- {
		if opened, ended, err = x.round(ctx, src, chunk, events); err != nil || opened && ended {
			return opened, ended, err
		}
	}
	return opened, ended, nil
}

// partEnds is what a round read of the events past the index's seq.
type partEnds struct {
	tokens []int64 // of the grants that ended
	seq    int64   // the seq read up to
	caught bool    // up to the newest event
	blind  bool    // events past the index's seq were pruned unread
}

// round is one of catchUp's, in one read transaction, so that the index holds the open grants
// of one snapshot: at most chunk grants past the mark, and when they were the last, the ends
// in at most events events past the seq; both go into the index at once.
func (x *Index) round(ctx context.Context, src *source, chunk, events int) (opened, ended bool, err error) {
	tx, err := src.r.BeginTx(ctx, src.q.Round)
	if err != nil {
		return false, false, fmt.Errorf("index the parts of new names: %w", src.q.w(err))
	}
	defer tx.Rollback()
	x.mu.RLock()
	mark, seq := x.mark, x.seq
	x.mu.RUnlock()
	rows, err := tx.QueryContext(ctx, src.q.Since, mark, chunk)
	if err != nil {
		return false, false, fmt.Errorf("index the parts of new names: %w", src.q.w(err))
	}
	var read Index
	n, err := read.scan(rows, 0, nil)
	rows.Close()
	if err != nil {
		return false, false, fmt.Errorf("index the parts of new names: %w", src.q.w(err))
	}
	ends := partEnds{seq: seq}
	if opened = n < chunk; opened {
		if ends, err = readEnds(ctx, src, tx, seq, events); err != nil {
			return false, false, fmt.Errorf("index the ends of grants: %w", err)
		}
	}
	x.merge(&read, ends)
	return opened, ends.caught, nil
}

// readEnds reads, in tx, the tokens of the grants that ended in the events past seq, at most
// events of them by seq. The seqs of the events kept have no gap (each batch takes the next
// ones, a rolled back batch gives its own back, and pruning deletes the oldest): when the
// oldest kept is past seq + 1, events that were never read are gone.
func readEnds(ctx context.Context, src *source, tx *sql.Tx, seq int64, events int) (partEnds, error) {
	var last, first int64
	if err := tx.QueryRowContext(ctx, src.q.Seqs).Scan(&last, &first); err != nil {
		return partEnds{}, src.q.w(err)
	}
	if first == 0 { // no event kept
		first = last + 1
	}
	if first > seq+1 {
		return partEnds{seq: last, caught: true, blind: true}, nil
	}
	to := min(last, seq+int64(events))
	ends := partEnds{seq: to, caught: to == last}
	rows, err := tx.QueryContext(ctx, src.q.Ends, seq, to)
	if err != nil {
		return partEnds{}, src.q.w(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t int64
		if err := rows.Scan(&t); err != nil {
			return partEnds{}, err
		}
		ends.tokens = append(ends.tokens, t)
	}
	return ends, src.q.w(rows.Err())
}

// scan appends rows of token, name and holder to x, but those past upTo (when above 0); last,
// when set, takes the key of the last row read.
func (x *Index) scan(rows *sql.Rows, upTo int64, last *partKey) (int, error) {
	var name, holder sql.RawBytes
	var token int64
	n := 0
	for rows.Next() {
		if err := rows.Scan(&token, &name, &holder); err != nil {
			return n, err
		}
		n++
		if last != nil {
			last.name, last.holder, last.token = append(last.name[:0], name...), append(last.holder[:0], holder...), token
		}
		if upTo > 0 && token > upTo {
			continue
		}
		x.add(token, name, holder)
	}
	return n, rows.Err()
}

// add appends an entry, and moves the mark to its token when past it (catchUp reads in order
// of token; a build set the mark first).
func (x *Index) add(token int64, name, holder []byte) {
	x.names = append(append(x.names, name...), 0)
	x.nameEnd = append(x.nameEnd, uint32(len(x.names)-1))
	x.holderOf = append(x.holderOf, x.holderIn(holder))
	x.tokens = append(x.tokens, token)
	x.mark = max(x.mark, token)
}

// holderIn is the number of holder in the dictionary, which it joins when new.
func (x *Index) holderIn(holder []byte) uint32 {
	if h, ok := x.holderID[string(holder)]; ok {
		return h
	}
	h := uint32(len(x.holderEnd))
	x.holders = append(append(x.holders, holder...), 0)
	x.holderEnd = append(x.holderEnd, uint32(len(x.holders)-1))
	if x.holderID == nil {
		x.holderID = make(map[string]uint32)
	}
	if len(x.holderID) < DictMost {
		x.holderID[string(holder)] = h
	}
	return h
}

// holder is entry i's holder.
func (x *Index) holder(i int) []byte {
	return entryOf(x.holders, x.holderEnd, int(x.holderOf[i]))
}

// merge appends the entries read, marks the grants that ended, and moves the seq, at once.
func (x *Index) merge(read *Index, ends partEnds) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.names)+len(read.names) > x.room || len(x.holders)+len(read.holders) > x.room {
		x.full = true
		x.names, x.nameEnd, x.holderOf, x.holders, x.holderEnd, x.holderID, x.tokens = nil, nil, nil, nil, nil, nil, nil
		x.built, x.byToken, x.ended, x.nEnded = 0, nil, nil, 0
	}
	for i, t := range read.tokens {
		if x.full {
			x.mark = max(x.mark, t) // so that catchUp goes on
			continue
		}
		x.add(t, entryOf(read.names, read.nameEnd, i), read.holder(i))
	}
	for len(x.ended)*64 < len(x.tokens) {
		x.ended = append(x.ended, 0)
	}
	for _, t := range ends.tokens {
		// A grant that ended before its chunk of the build was read, or past the mark, is not
		// in the index.
		if i, ok := x.find(t); ok && !x.ended.has(i) {
			x.ended.set(i)
			x.nEnded++
		}
	}
	x.seq, x.blind = ends.seq, x.blind || ends.blind
}

// find is the entry of token t.
func (x *Index) find(t int64) (int, bool) {
	if i, ok := slices.BinarySearch(x.tokens[x.built:], t); ok {
		return x.built + i, true
	}
	k, ok := sort.Find(len(x.byToken), func(k int) int { return cmp.Compare(t, x.tokens[x.byToken[k]]) })
	if !ok {
		return 0, false
	}
	return int(x.byToken[k]), true
}

// sift lists the tokens of the entries of open grants that pass s (listed, when at most most
// of them), counts those of them that are no semaphore's slot (counted, when ended says the
// ends are caught up, none went unread, and s counts), and finds the first of them after the
// page's key (bounded, when s's order Bounds and one is).
func (x *Index) sift(s heldsql.Sift, most int, ended bool) Answer {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.full {
		return Answer{}
	}
	var out Answer
	var first []byte // the name of the bound, in the index
	many, bounds := false, s.Bounds()
	x.each(s, func(i int, name []byte) {
		t := x.tokens[i]
		if len(out.Tokens) < most {
			out.Tokens = append(out.Tokens, t)
		} else {
			many = true
		}
		if heldsql.Plain(name) {
			out.Open++
		}
		// The index holds every open grant of its snapshot, and those that ended since it
		// marked them: the first of them that passes is at or before the first that does now
		// (but a grant that opened after the snapshot, as a page read before it would miss).
		if bounds && s.Later(name, t) && (!out.Bounded || s.Before(name, t, first, out.FirstToken)) {
			out.Bounded, first, out.FirstToken = true, name, t
		}
	})
	out.First = string(first)
	out.Listed = most > 0 && !many
	if !out.Listed {
		out.Tokens = nil
	}
	out.Counted = ended && !x.blind && s.Counts()
	return out
}

// each calls f with every entry of an open grant that passes s, and its name. With a part of
// the holder, it marks the holders of the dictionary that have it; then it reads every entry's
// holder number, or, when the part of the name is the sparser, searches the names for it; and
// it checks each entry found.
func (x *Index) each(s heldsql.Sift, f func(i int, name []byte)) {
	part, holder := s.Parts()
	var with bits // bit h: holder h of the dictionary has the part
	if len(holder) > 0 {
		if with = x.holdersWith(holder); with == nil {
			return
		}
	}
	check := func(i int) {
		if x.ended.has(i) {
			return
		}
		// A holder part is settled by with, by the dictionary's own holders.
		name := entryOf(x.names, x.nameEnd, i)
		if s.MatchName(name) {
			f(i, name)
		}
	}
	switch {
	case with != nil && (len(part) == 0 || x.fewerHolders(with, part)):
		for i, h := range x.holderOf {
			if with.has(int(h)) {
				check(i)
			}
		}
	case len(part) == 0:
		for i := range x.tokens {
			check(i)
		}
	default:
		for i := range find(x.names, x.nameEnd, part) {
			if with == nil || with.has(int(x.holderOf[i])) {
				check(i)
			}
		}
	}
}

// holdersWith marks the holders of the dictionary that contain part (nil when none does).
func (x *Index) holdersWith(part []byte) bits {
	var with bits
	for h := range find(x.holders, x.holderEnd, part) {
		if with == nil {
			with = make(bits, (len(x.holderEnd)+63)/64)
		}
		with.set(h)
	}
	return with
}

// find yields the entries, of a string of entries whose ends are ends, that contain part
// (non-empty), in order: every one, and those alone.
func find(in []byte, ends []uint32, part []byte) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i, from := 0, 0; from < len(in); i++ {
			at := bytes.Index(in[from:], part)
			if at < 0 {
				return
			}
			if i = entryAt(ends, i, from+at); i == len(ends) {
				return
			}
			// A match that runs past its entry's end (a part with a 0 byte) is in no entry.
			if from+at+len(part) <= int(ends[i]) && !yield(i) {
				return
			}
			from = int(ends[i]) + 1
		}
	}
}

// fewerHolders reports whether fewer of the first entries have a holder marked in with than
// have part in their name: a few microseconds that spare a search of the commoner part (?q=job-
// &holder=-1 at a million: every name has job-, one holder in six -1).
func (x *Index) fewerHolders(with bits, part []byte) bool {
	n := min(len(x.nameEnd), 4096)
	if n == 0 {
		return false
	}
	held := 0
	for _, h := range x.holderOf[:n] {
		if with.has(int(h)) {
			held++
		}
	}
	return held < bytes.Count(x.names[:x.nameEnd[n-1]], part)
}

// bits is a set of small numbers, a bit each.
type bits []uint64

// has reports whether i is in b.
func (b bits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// set puts i in b.
func (b bits) set(i int) { b[i/64] |= 1 << (i % 64) }

// entryAt is the first entry from i on whose end is at or past at (len(ends) for none): a
// galloping search, as the matches of a common part are near each other.
func entryAt(ends []uint32, i, at int) int {
	step := 1
	for i+step < len(ends) && int(ends[i+step-1]) < at {
		i += step
		step *= 2
	}
	hi := min(i+step, len(ends))
	return i + sort.Search(hi-i, func(k int) bool { return int(ends[i+k]) >= at })
}

// entryOf is entry i of a string of entries whose ends are ends.
func entryOf(in []byte, ends []uint32, i int) []byte {
	start := 0
	if i > 0 {
		start = int(ends[i-1]) + 1
	}
	return in[start:ends[i]]
}
