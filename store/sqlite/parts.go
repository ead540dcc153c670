package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
)

// parts finds the open grants whose name or holder contains a part, for Held's filters ?q= and
// ?holder=, without a walk of grants_open_name: it keeps the names and holders of the open
// grants in memory, in two byte strings that bytes.Index searches, with each entry's token.
//
// It is built and kept by readers, off the write path: the writer knows nothing of it. The
// first filter that needs it starts a keeper in the background, which builds it (from
// grants_open_name, a paced chunk per statement, up to the last token issued then: its mark),
// then every second appends the grants opened since (tokens past the mark, through
// grants_open_newest: a token is never reused and a grant's name and holder never change),
// and each filter does too before it searches, so that it misses none. A grant that ended
// stays in it until the keeper rebuilds it, when they outnumber the open grants: what it finds
// is a superset of the matches, which Held then checks in SQL (heldsql.Query.Among), so its
// answers stay exact. The keeper drops it after partsIdle without a filter. Until it is built,
// when more grants than a chunk opened since the keeper's last pass, and when it finds more
// candidates than Held sorts, Held sieves in SQL.
type parts struct {
	mode   PartsMode
	chunk  int           // tailChunk but in tests
	every  time.Duration // partsEvery but in tests
	slack  int           // how many more ended grants than open ones a rebuild waits for, besides
	room   int           // partIndex.room
	r      *sql.DB
	log    *slog.Logger
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	onSwap func() // called when the keeper has put a new build in place (tests)

	mu      sync.Mutex
	idx     *partIndex // nil until built
	keeping bool       // a keeper runs
	used    time.Time  // the last filter's time
}

// partIndex is one build of the parts' index and the grants appended since.
type partIndex struct {
	grow sync.Mutex // held by whoever appends: one reader of the tail at a time

	mu             sync.RWMutex
	names, holders []byte   // each entry followed by a 0 byte
	nameEnd        []uint32 // nameEnd[i]: the offset of entry i's 0 byte in names
	holderEnd      []uint32
	tokens         []int64
	mark           int64 // every open grant up to this token is in the index
	room           int   // the most bytes of names, or of holders: 4 GiB, its offsets' (less in tests)
	full           bool  // its names or holders outgrew room: it answers nothing
}

const (
	// tailChunk is the most grants one statement reads past the mark, and the most a filter
	// reads before it leaves them to the keeper and sieves in SQL.
	tailChunk = 10_000
	// partsEvery is how often the keeper appends the grants opened since its last pass.
	partsEvery = time.Second
	// partsIdle is how long the keeper keeps the index without a filter that reads it.
	partsIdle = 10 * time.Minute
)

// PartsMode is how Held finds the grants whose name or holder contains a part (Options.HeldParts).
type PartsMode int

const (
	// PartsBackground keeps the index of parts, built in the background on first use; until it
	// is ready, Held sieves grants_open_name in SQL.
	PartsBackground PartsMode = iota
	// PartsAtOnce builds, catches up and rebuilds the index in the call that needs it, so that
	// every filter reads it: for tests.
	PartsAtOnce
	// PartsNever always sieves grants_open_name in SQL, keeping no index.
	PartsNever
)

func newParts(mode PartsMode, r *sql.DB, log *slog.Logger) *parts {
	ctx, cancel := context.WithCancel(context.Background())
	return &parts{mode: mode, chunk: tailChunk, every: partsEvery, slack: 4096, room: math.MaxUint32, r: r, log: log, ctx: ctx, cancel: cancel}
}

// close stops the keeper and waits for it.
func (p *parts) close() {
	p.cancel()
	p.wg.Wait()
}

// candidates lists the tokens of the open grants whose name contains contains and whose holder
// contains holder (an empty part is no condition), with some grants that ended since; ok is
// false when the index is not ready or more than most were found: then the caller sieves in
// SQL.
func (p *parts) candidates(ctx context.Context, contains, holder string, most int) (tokens []int64, ok bool, err error) {
	switch p.mode {
	case PartsNever:
		return nil, false, nil
	case PartsAtOnce:
		return p.candidatesAtOnce(ctx, contains, holder, most)
	}
	x := p.use()
	if x == nil {
		return nil, false, nil
	}
	if caught, err := x.catchUp(ctx, p.r, p.chunk, p.chunk); err != nil || !caught {
		return nil, false, err
	}
	tokens, ok = x.find([]byte(contains), []byte(holder), most)
	return tokens, ok, nil
}

// candidatesAtOnce is candidates with every step in the call (PartsAtOnce).
func (p *parts) candidatesAtOnce(ctx context.Context, contains, holder string, most int) (tokens []int64, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idx == nil || p.stale(ctx, p.idx) {
		if p.idx, err = buildParts(ctx, p.r, p.chunk, p.room, false); err != nil {
			return nil, false, err
		}
	}
	if _, err := p.idx.catchUp(ctx, p.r, p.chunk, -1); err != nil {
		return nil, false, err
	}
	tokens, ok = p.idx.find([]byte(contains), []byte(holder), most)
	return tokens, ok, nil
}

// use is the index when it is built, else nil, and notes the use: it starts the keeper when
// none runs.
func (p *parts) use() *partIndex {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used = time.Now()
	if !p.keeping && p.ctx.Err() == nil {
		p.keeping = true
		p.wg.Add(1)
		go p.keep()
	}
	return p.idx
}

// keep builds the index, then keeps it (see parts) until it is idle or the store closes.
func (p *parts) keep() {
	defer p.wg.Done()
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		p.mu.Lock()
		x, idle := p.idx, time.Since(p.used) > partsIdle
		if idle || p.ctx.Err() != nil {
			p.idx, p.keeping = nil, false
			p.mu.Unlock()
			return
		}
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

// pass is one of the keeper's: a build when x is nil or stale, else the grants opened since.
func (p *parts) pass(x *partIndex) error {
	if x != nil && !p.stale(p.ctx, x) {
		_, err := x.catchUp(p.ctx, p.r, p.chunk, -1)
		return err
	}
	began := time.Now()
	x, err := buildParts(p.ctx, p.r, p.chunk, p.room, true)
	if err == nil {
		_, err = x.catchUp(p.ctx, p.r, p.chunk, -1)
	}
	if err != nil {
		return err
	}
	p.log.Info("built the index of the parts of names", "grants", len(x.tokens), "bytes", len(x.names)+len(x.holders)+12*len(x.tokens),
		"took", time.Since(began))
	p.mu.Lock()
	p.idx = x
	p.mu.Unlock()
	if p.onSwap != nil {
		p.onSwap()
	}
	return nil
}

// stale reports whether the grants that ended outnumber the open ones in x (and slack more):
// a rebuild drops them.
func (p *parts) stale(ctx context.Context, x *partIndex) bool {
	var open int
	if err := p.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'open_grants'`).Scan(&open); err != nil {
		return false
	}
	x.mu.RLock()
	n := len(x.tokens)
	x.mu.RUnlock()
	return n > 2*open+p.slack
}

// The statements that read the index's entries: the open grants after a key of
// grants_open_name (which holds name and holder), in its order, and those past a token, in
// order (TestPartsPlans).
const (
	partsAfter = `SELECT token, name, holder FROM grants INDEXED BY grants_open_name
		WHERE ended_at IS NULL AND (name, holder, token) > (?, ?, ?) ORDER BY name, holder, token LIMIT ?`
	partsSince = `SELECT token, name, holder FROM grants INDEXED BY grants_open_newest
		WHERE ended_at IS NULL AND token > ? ORDER BY token LIMIT ?`
)

// partsPause is how many times the time it took to read a chunk the keeper's build waits
// before the next: a build at a million reads for ~1.5 s, and without pauses it took a core
// of two from the writer's commits while it ran (acquires halved, BenchmarkPartsBesideAcquire).
const partsPause = 3

// buildParts reads every open grant's name and holder from grants_open_name, chunk at a time
// in its order, each chunk a statement of its own (no read transaction holds the WAL), and
// paced when pace: the last token issued before the first (meta.last_token, written in the
// transaction of the batch that issued it) is the mark, and the grants past it that the walk
// meets are left to catchUp. A grant up to the mark that is open when its chunk is read is in
// it: its name and holder, so its place in the index, never change.
func buildParts(ctx context.Context, r *sql.DB, chunk, room int, pace bool) (*partIndex, error) {
	x := &partIndex{room: room}
	if err := r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'last_token'`).Scan(&x.mark); err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", w(err))
	}
	var after partKey
	for {
		began := time.Now()
		rows, err := r.QueryContext(ctx, partsAfter, string(after.name), string(after.holder), after.token, chunk)
		if err != nil {
			return nil, fmt.Errorf("index the parts of names: %w", w(err))
		}
		n, err := x.scan(rows, x.mark, &after)
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("index the parts of names: %w", err)
		}
		if n < chunk {
			return x, nil
		}
		if pace {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(partsPause * time.Since(began)):
			}
		}
	}
}

// partKey is the key of an entry of grants_open_name (bound as text: to SQLite a blob sorts
// after every text).
type partKey struct {
	name, holder []byte
	token        int64
}

// catchUp appends the open grants past the mark, chunk at a time, at most most of them (-1:
// all); caught says that none is left.
func (x *partIndex) catchUp(ctx context.Context, r *sql.DB, chunk, most int) (caught bool, err error) {
	x.grow.Lock()
	defer x.grow.Unlock()
	for read := 0; most < 0 || read < most; {
		x.mu.RLock()
		mark := x.mark
		x.mu.RUnlock()
		rows, err := r.QueryContext(ctx, partsSince, mark, chunk)
		if err != nil {
			return false, fmt.Errorf("index the parts of new names: %w", w(err))
		}
		n, err := x.scan(rows, 0, nil)
		rows.Close()
		if err != nil {
			return false, fmt.Errorf("index the parts of new names: %w", err)
		}
		if n < chunk {
			return true, nil
		}
		read += n
	}
	return false, nil
}

// scan appends rows of token, name and holder, a chunk at a time (so that a search waits for
// no read), but those past upTo (when above 0), and moves the mark to the greatest token
// appended (catchUp reads in order of token; a build set it first); last, when set, takes the
// key of the last row read.
func (x *partIndex) scan(rows *sql.Rows, upTo int64, last *partKey) (int, error) {
	var chunk partIndex
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
		if chunk.add(token, name, holder); len(chunk.tokens) == 4096 {
			x.merge(&chunk)
		}
	}
	x.merge(&chunk)
	return n, w(rows.Err())
}

// add appends an entry.
func (x *partIndex) add(token int64, name, holder []byte) {
	x.names = append(append(x.names, name...), 0)
	x.nameEnd = append(x.nameEnd, uint32(len(x.names)-1))
	x.holders = append(append(x.holders, holder...), 0)
	x.holderEnd = append(x.holderEnd, uint32(len(x.holders)-1))
	x.tokens = append(x.tokens, token)
	x.mark = max(x.mark, token)
}

// merge appends the entries of chunk and empties it.
func (x *partIndex) merge(chunk *partIndex) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.names)+len(chunk.names) > x.room || len(x.holders)+len(chunk.holders) > x.room {
		x.full = true
		x.names, x.nameEnd, x.holders, x.holderEnd, x.tokens = nil, nil, nil, nil, nil
	}
	for i, t := range chunk.tokens {
		if x.full {
			x.mark = max(x.mark, t) // so that catchUp goes on
			continue
		}
		x.add(t, entryOf(chunk.names, chunk.nameEnd, i), entryOf(chunk.holders, chunk.holderEnd, i))
	}
	chunk.names, chunk.nameEnd, chunk.holders, chunk.holderEnd, chunk.tokens = chunk.names[:0], chunk.nameEnd[:0], chunk.holders[:0], chunk.holderEnd[:0], chunk.tokens[:0]
}

// find lists the tokens of the entries whose name contains part and whose holder contains
// holder, unless there are more than most (ok false).
func (x *partIndex) find(part, holder []byte, most int) (tokens []int64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.full {
		return nil, false
	}
	// Search the string of the part given (the name's when both are).
	in, ends, other, otherEnds, want, also := x.names, x.nameEnd, x.holders, x.holderEnd, part, holder
	if len(part) == 0 {
		in, ends, other, otherEnds, want, also = x.holders, x.holderEnd, x.names, x.nameEnd, holder, part
	}
	for from := 0; from < len(in); {
		at := bytes.Index(in[from:], want)
		if at < 0 {
			break
		}
		i := sort.Search(len(ends), func(i int) bool { return int(ends[i]) >= from+at })
		if i == len(ends) {
			break
		}
		if len(also) == 0 || bytes.Contains(entryOf(other, otherEnds, i), also) {
			if len(tokens) == most {
				return nil, false
			}
			tokens = append(tokens, x.tokens[i])
		}
		from = int(ends[i]) + 1
	}
	return tokens, true
}

// entryOf is entry i of a string of entries whose ends are ends.
func entryOf(in []byte, ends []uint32, i int) []byte {
	start := 0
	if i > 0 {
		start = int(ends[i-1]) + 1
	}
	return in[start:ends[i]]
}
