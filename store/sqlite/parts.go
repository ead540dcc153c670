package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"sync"
)

// parts finds the open grants whose name or holder contains a part, for Held's filters ?q= and
// ?holder=, without a walk of grants_open_name: it keeps the names and holders of the open
// grants in memory, in two byte strings that bytes.Index searches, with each entry's token.
//
// It is built and kept by readers, off the write path: the writer knows nothing of it. It is
// built once, in the background, on the first filter that needs it (from grants_open_name, in
// one read transaction, up to the last token issued then: its mark), and every filter first
// reads the grants opened since (tokens past the mark, through grants_open_newest: a token is
// never reused and a grant's name and holder never change). A grant that ended stays in it
// until a rebuild, when they outnumber the open grants: what it finds is a superset of the
// matches, which Held then checks in SQL (heldsql.Query.Among), so its answers stay exact.
// Until it is built, and when it finds more candidates than Held sorts, Held sieves in SQL.
type parts struct {
	mode   PartsMode
	chunk  int // tailChunk but in tests
	slack  int // how many more ended grants than open ones a rebuild waits for, besides
	r      *sql.DB
	log    *slog.Logger
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	idx      *partIndex // nil until built
	building bool
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
}

// tailChunk is the most grants one statement reads past the mark; a filter reads at most
// tailRead of them before it leaves the rest to the background and sieves in SQL.
const (
	tailChunk = 10_000
	tailRead  = 50_000
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
	return &parts{mode: mode, chunk: tailChunk, slack: 4096, r: r, log: log, ctx: ctx, cancel: cancel}
}

// close stops a build in progress and waits for it.
func (p *parts) close() {
	p.cancel()
	p.wg.Wait()
}

// candidates lists the tokens of the open grants whose name contains contains and whose holder
// contains holder (an empty part is no condition), with some grants that ended since; ok is
// false when the index is not ready or more than most were found: then the caller sieves in
// SQL.
func (p *parts) candidates(ctx context.Context, contains, holder string, most int) (tokens []int64, ok bool, err error) {
	if p.mode == PartsNever {
		return nil, false, nil
	}
	if p.mode == PartsAtOnce {
		return p.candidatesAtOnce(ctx, contains, holder, most)
	}
	x := p.ready()
	if x == nil {
		return nil, false, nil
	}
	caught, err := x.catchUp(ctx, p.r, p.chunk, tailRead)
	if err != nil {
		return nil, false, err
	}
	if !caught {
		p.spawn(func(ctx context.Context) error { _, err := x.catchUp(ctx, p.r, p.chunk, -1); return err })
		return nil, false, nil
	}
	if p.stale(ctx, x) {
		p.rebuild()
	}
	tokens, ok = x.find([]byte(contains), []byte(holder), most)
	return tokens, ok, nil
}

// candidatesAtOnce is candidates with every step in the call (PartsAtOnce).
func (p *parts) candidatesAtOnce(ctx context.Context, contains, holder string, most int) (tokens []int64, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idx == nil || p.stale(ctx, p.idx) {
		if p.idx, err = buildParts(ctx, p.r); err != nil {
			return nil, false, err
		}
	}
	if _, err := p.idx.catchUp(ctx, p.r, p.chunk, -1); err != nil {
		return nil, false, err
	}
	tokens, ok = p.idx.find([]byte(contains), []byte(holder), most)
	return tokens, ok, nil
}

// ready is the index when it is built, else nil, having started its build.
func (p *parts) ready() *partIndex {
	p.mu.Lock()
	x := p.idx
	p.mu.Unlock()
	if x == nil {
		p.rebuild()
	}
	return x
}

// rebuild builds a new index in the background (unless a build is running), which replaces the
// current one when done.
func (p *parts) rebuild() {
	p.mu.Lock()
	if p.building || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.building = true
	p.mu.Unlock()
	p.spawn(func(ctx context.Context) error {
		x, err := buildParts(ctx, p.r)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.building = false
		if err == nil {
			p.idx = x
		}
		return err
	})
}

// spawn runs f in the background until close, logging its error (the filters sieve in SQL
// meanwhile, and the next one tries again).
func (p *parts) spawn(f func(context.Context) error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := f(p.ctx); err != nil && p.ctx.Err() == nil {
			p.log.Warn("the index of the parts of names", "err", err)
		}
	}()
}

// stale reports whether the grants that ended outnumber the open ones in x (and a few
// thousand): a rebuild drops them.
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

// buildParts reads every open grant's name and holder from grants_open_name, which holds both,
// in one read transaction, with the last token issued (meta.last_token, written in the
// transaction of the batch that issued it) as the mark.
func buildParts(ctx context.Context, r *sql.DB) (*partIndex, error) {
	tx, err := r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", w(err))
	}
	defer tx.Rollback()
	x := &partIndex{}
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'last_token'`).Scan(&x.mark); err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", w(err))
	}
	rows, err := tx.QueryContext(ctx, `SELECT token, name, holder FROM grants INDEXED BY grants_open_name WHERE ended_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", w(err))
	}
	defer rows.Close()
	if _, err := x.scan(rows); err != nil {
		return nil, fmt.Errorf("index the parts of names: %w", err)
	}
	return x, nil
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
		rows, err := r.QueryContext(ctx, `SELECT token, name, holder FROM grants INDEXED BY grants_open_newest
			WHERE ended_at IS NULL AND token > ? ORDER BY token LIMIT ?`, mark, chunk)
		if err != nil {
			return false, fmt.Errorf("index the parts of new names: %w", w(err))
		}
		n, err := x.scan(rows)
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

// scan appends rows of token, name and holder, a chunk at a time, and moves the mark to the
// greatest token read (catchUp reads in order of token; a build set it first).
func (x *partIndex) scan(rows *sql.Rows) (int, error) {
	type entry struct {
		token        int64
		name, holder []byte
	}
	var chunk []entry
	flush := func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		for _, e := range chunk {
			x.names = append(append(x.names, e.name...), 0)
			x.nameEnd = append(x.nameEnd, uint32(len(x.names)-1))
			x.holders = append(append(x.holders, e.holder...), 0)
			x.holderEnd = append(x.holderEnd, uint32(len(x.holders)-1))
			x.tokens = append(x.tokens, e.token)
			x.mark = max(x.mark, e.token)
		}
		chunk = chunk[:0]
	}
	n := 0
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.token, &e.name, &e.holder); err != nil {
			return n, err
		}
		chunk = append(chunk, e)
		if n++; len(chunk) == 4096 {
			flush()
		}
	}
	flush()
	return n, w(rows.Err())
}

// find lists the tokens of the entries whose name contains part and whose holder contains
// holder, unless there are more than most (ok false).
func (x *partIndex) find(part, holder []byte, most int) (tokens []int64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
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
