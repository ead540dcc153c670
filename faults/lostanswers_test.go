package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model of one lease name and one fenced resource written with Lease-Name, by the server's
// clock in milliseconds: expiry (a lease is live while now < expires), renewals, releases
// (with current or stale lease_ids), revokes and fenced writes (invariants 1, 2, 6 and 7).
// The server's "now" at an operation is known exactly when the answer carries it
// (acquired_at, renewed_at, updated_at), and otherwise lies within the operation's call and
// return by the shared wall clock (slack: the server's clock is anchored to the millisecond).
// An expiry is an interval [expLo, expHi]: a renewal with no answer may or may not have
// pushed it out.
type linState struct {
	held         bool  // granted and not released or revoked (it may have expired)
	token        int64 // the current or last grant
	holder       int   // the client it was granted to
	expLo, expHi int64
	last         int64 // the largest token issued
	fence        int64
	now          int64 // a lower bound on the server's clock
}

type linInput struct {
	op     string // acquire, renew, release, put, revoke
	client int
	token  int64 // the grant the client acts with
	callMs int64
	ttlMs  int64
}

type linOutput struct {
	unknown bool // no answer came: either outcome
	status  int
	token   int64 // acquire
	at      int64 // the server's time in the answer (ms), 0 when none
	expires int64 // acquire, renew
	retMs   int64
	holder  int    // acquire answered lease_held: the holder named
	detail  string // for the description: who holds, per a 409
	retried bool   // more than one attempt: the answer may be to a repeat of an applied one
}

const slackMs = 3

// live returns whether the lease can be live, and can be over, at some server time in
// [lo, hi], with the state narrowed to each choice.
func (s linState) live(lo, hi int64) (canLive bool, liveSt linState, canEnd bool, endSt linState) {
	lo = max(lo, s.now)
	if lo > hi {
		return false, s, false, s
	}
	if s.held && s.expHi > lo {
		canLive, liveSt = true, s
		liveSt.now, liveSt.expLo = lo, max(s.expLo, lo+1)
	}
	if !s.held {
		canEnd, endSt = true, s
		endSt.now = lo
	} else if s.expLo <= hi {
		canEnd, endSt = true, s
		endSt.now, endSt.expHi = max(lo, s.expLo), min(s.expHi, hi)
	}
	return
}

func linStep(state, in, out any) []any {
	s, i, o := state.(linState), in.(linInput), out.(linOutput)
	if o.retried && o.status >= 400 && i.op != "acquire" {
		// A refusal after a retry may answer the retry of an attempt that acted (a renewal,
		// a write, a revoke) and whose answer was lost: either outcome.
		return linStep(state, in, linOutput{unknown: true})
	}
	lo, hi := i.callMs-slackMs, o.retMs+slackMs
	if o.unknown {
		hi = math.MaxInt64
	}
	if o.at != 0 {
		lo, hi = o.at, o.at
	}
	var next []any
	add := func(ok bool, st linState) {
		if ok {
			next = append(next, st)
		}
	}
	canLive, liveSt, canEnd, endSt := s.live(lo, hi)
	mine := s.held && s.token == i.token
	switch i.op {
	case "acquire":
		switch {
		case o.status == http.StatusOK:
			if canEnd && o.token > s.last {
				n := endSt
				n.held, n.token, n.holder, n.expLo, n.expHi, n.last = true, o.token, i.client, o.expires, o.expires, o.token
				add(true, n)
			}
		case o.status == http.StatusConflict && o.token != 0:
			// lease_lost: a retry with the Idempotency-Key found the grant its first attempt
			// got (token o.token) already expired: granted within the call, over by the answer.
			if canEnd && o.token > s.last {
				n := endSt
				n.held, n.token, n.holder, n.last = true, o.token, i.client, o.token
				n.expLo, n.expHi = n.now+i.ttlMs, hi
				add(n.expLo <= n.expHi, n)
			}
		case o.status == http.StatusConflict:
			// lease_held names the holder of the live grant.
			add(canLive && o.holder == s.holder, liveSt)
		}
	case "renew":
		switch {
		case o.unknown:
			add(true, s)
			if mine && canLive {
				n := liveSt
				n.expLo, n.expHi = max(n.expLo, i.callMs-slackMs+i.ttlMs), math.MaxInt64
				add(true, n)
			}
		case o.status == http.StatusOK:
			if mine && canLive {
				n := liveSt
				n.expLo, n.expHi = o.expires, o.expires
				add(true, n)
			}
		default:
			add(!mine, s)
			add(mine && canEnd, endSt)
		}
	case "release":
		switch {
		case o.unknown:
			add(true, s)
			if mine && canLive {
				n := liveSt
				n.held = false
				add(true, n)
			}
		case o.status == http.StatusNoContent:
			if mine && canLive {
				n := liveSt
				n.held = false
				add(true, n)
			}
			// A repeat of a release, or a stale lease_id whose own grant was released:
			// either way the current lease is not touched.
			add(!mine, s)
		default:
			add(!mine, s)
			add(mine && canEnd, endSt)
		}
	case "put":
		applies := mine && i.token >= s.fence
		switch {
		case o.unknown:
			add(true, s)
			if applies && canLive {
				n := liveSt
				n.fence = i.token
				add(true, n)
			}
		case o.status == http.StatusOK || o.status == http.StatusCreated: // 201: the write created it
			if applies && canLive {
				n := liveSt
				n.fence = i.token
				add(true, n)
			}
		default:
			add(!applies, s)
			add(applies && canEnd, endSt)
		}
	case "revoke":
		// A revoke names the grant it ends (?token=), so that a retry cannot end the next one.
		switch {
		case o.unknown || o.status == http.StatusNoContent:
			if mine && canLive {
				n := liveSt
				n.held = false
				add(true, n)
			}
			add(!mine || o.unknown, s)
			add(mine && canEnd, endSt)
		default:
			add(!mine, s)
			add(mine && canEnd, endSt)
		}
	}
	return next
}

var linModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{}} },
	Step: linStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		if o.unknown {
			return fmt.Sprintf("%s(%d) -> ?", i.op, i.token)
		}
		return fmt.Sprintf("%s(%d) -> %d token=%d at=%d exp=%d %s", i.op, i.token, o.status, o.token, o.at, o.expires, o.detail)
	},
}).ToModel()

// linClient is one client of the lost-answers test: it sends through the proxy, retries a
// request whose answer was lost (an acquire with the same Idempotency-Key), and records one
// operation per logical request.
type linClient struct {
	id      int
	proxy   *server // the server's API, reached through the proxy
	direct  *server // the server itself: an acquire's last retry, to learn its outcome
	mu      *sync.Mutex
	history *[]porcupine.Operation
	start   time.Time
	// retriedGrants counts acquires granted after a lost answer, over all clients.
	retriedGrants *atomic.Int64
	// droppedGrants counts the grants whose answer the proxy dropped at once, so that the
	// client's retry asks again within the ttl: the test goes on until it has seen a few, so
	// that every run tests the Idempotency-Key (a server that ignores it answers lease_held).
	droppedGrants *atomic.Int64
}

var linHTTP = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (c *linClient) send(s *server, method, path string, body any, hdr ...string) reply {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	case nil:
	default:
		b, _ = json.Marshal(v)
		hdr = append(hdr, "Content-Type", "application/json")
	}
	req, _ := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := linHTTP.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{err: err}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: rb}
}

func (c *linClient) record(in linInput, call time.Time, out linOutput, ret time.Time) {
	r := int64(math.MaxInt64)
	if !out.unknown {
		r = ret.Sub(c.start).Nanoseconds()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.history = append(*c.history, porcupine.Operation{ClientId: c.id, Input: in, Call: call.Sub(c.start).Nanoseconds(), Output: out, Return: r})
}

// do sends one logical request, up to 3 attempts through the proxy; acquire then asks the
// server directly with the same Idempotency-Key, which answers what it did the first time.
func (c *linClient) do(in linInput, method, path string, body any, hdr ...string) (linOutput, string) {
	in.client = c.id
	call := time.Now()
	in.callMs = call.UnixMilli()
	var rep reply
	attempts := 0
	for attempts < 3 {
		attempts++
		if rep = c.send(c.proxy, method, path, body, hdr...); rep.err == nil && rep.status < 500 {
			break
		}
	}
	if (rep.err != nil || rep.status >= 500) && in.op == "acquire" {
		rep = c.send(c.direct, method, path, body, hdr...)
	}
	ret := time.Now()
	out := linOutput{status: rep.status, retMs: ret.UnixMilli(), retried: attempts > 1}
	if rep.err != nil || rep.status >= 500 {
		out = linOutput{unknown: true}
	}
	if out.status == http.StatusConflict {
		var v struct {
			Code      string    `json:"code"`
			Detail    string    `json:"detail"`
			Holder    string    `json:"holder"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		json.Unmarshal(rep.body, &v)
		out.detail = fmt.Sprintf("%s holder=%s exp=%d", v.Code, v.Holder, v.ExpiresAt.UnixMilli())
		out.holder, _ = strconv.Atoi(v.Holder)
		if m := replayedTokenRE.FindStringSubmatch(v.Detail); in.op == "acquire" && v.Code == "lease_lost" && m != nil {
			out.token, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	if out.status == http.StatusOK {
		var v struct {
			Token     int64     `json:"token"`
			Acquired  time.Time `json:"acquired_at"`
			Renewed   time.Time `json:"renewed_at"`
			Updated   time.Time `json:"updated_at"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		json.Unmarshal(rep.body, &v)
		out.token, out.expires = v.Token, v.ExpiresAt.UnixMilli()
		switch in.op {
		case "acquire":
			out.at = v.Acquired.UnixMilli()
		case "renew":
			out.at = v.Renewed.UnixMilli()
		case "put":
			out.at, out.expires = v.Updated.UnixMilli(), 0
		}
	}
	if in.op == "acquire" && out.retried && (out.status == http.StatusOK || out.token != 0) {
		c.retriedGrants.Add(1)
	}
	c.record(in, call, out, ret)
	var id struct {
		LeaseID string `json:"lease_id"`
	}
	if out.status == http.StatusOK {
		json.Unmarshal(rep.body, &id)
	}
	return out, id.LeaseID
}

// replayedTokenRE finds the token in the answer to an acquire retried with its
// Idempotency-Key after its grant ended.
var replayedTokenRE = regexp.MustCompile(`Idempotency-Key \(token (\d+)\)`)

type grant struct {
	token int64
	id    string
}

// run drives the client for d: acquire with a short ttl, then renew, write, release, or keep
// still past the ttl; now and then a stale lease_id or token, or a revoke.
func (c *linClient) run(d time.Duration, ttl time.Duration) {
	minEnd, maxEnd := time.Now().Add(d), time.Now().Add(d+30*time.Second)
	var cur *grant
	var old []grant
	for now := time.Now(); now.Before(minEnd) || (now.Before(maxEnd) && c.droppedGrants.Load() < minDroppedGrants); now = time.Now() {
		r := mrand.IntN(100)
		stale := grant{}
		if len(old) > 0 {
			stale = old[mrand.IntN(len(old))]
		}
		switch {
		case r < 4 && (cur != nil || stale.id != ""):
			g := stale
			if cur != nil && mrand.IntN(2) == 0 {
				g = *cur
			}
			c.do(linInput{op: "revoke", token: g.token}, "DELETE", "/v1/leases/lin?token="+strconv.FormatInt(g.token, 10), nil)
		case r < 8 && stale.id != "":
			c.do(linInput{op: "release", token: stale.token}, "POST", "/v1/leases/lin/release", map[string]any{"lease_id": stale.id})
		case r < 12 && stale.id != "":
			c.do(linInput{op: "put", token: stale.token}, "PUT", "/v1/resources/lin-res", []byte(fmt.Sprint(c.id)),
				"Fencing-Token", strconv.FormatInt(stale.token, 10), "Lease-Name", "lin")
		case cur == nil:
			key := make([]byte, 16)
			rand.Read(key)
			out, id := c.do(linInput{op: "acquire", ttlMs: ttl.Milliseconds()}, "POST", "/v1/leases/lin/acquire",
				map[string]any{"holder": fmt.Sprint(c.id), "ttl_ms": ttl.Milliseconds()}, "Idempotency-Key", hex.EncodeToString(key))
			if out.status == http.StatusOK {
				cur = &grant{token: out.token, id: id}
			} else {
				time.Sleep(time.Duration(mrand.IntN(30)) * time.Millisecond)
			}
		case r < 40:
			c.do(linInput{op: "renew", token: cur.token, ttlMs: ttl.Milliseconds()}, "POST", "/v1/leases/lin/renew",
				map[string]any{"lease_id": cur.id, "ttl_ms": ttl.Milliseconds()})
		case r < 70:
			c.do(linInput{op: "put", token: cur.token}, "PUT", "/v1/resources/lin-res", []byte(fmt.Sprint(c.id)),
				"Fencing-Token", strconv.FormatInt(cur.token, 10), "Lease-Name", "lin")
		case r < 85:
			c.do(linInput{op: "release", token: cur.token}, "POST", "/v1/leases/lin/release", map[string]any{"lease_id": cur.id})
			old, cur = append(old, *cur), nil
		default:
			time.Sleep(time.Duration(mrand.IntN(int(ttl.Milliseconds()))) * time.Millisecond) // a pause, maybe past the ttl
			if mrand.IntN(2) == 0 {
				old, cur = append(old, *cur), nil
			}
		}
	}
}

// minDroppedGrants is how many grants' answers a run of the lost-answers test loses at once
// (at least d, at most d+30 s): each is a retry the Idempotency-Key must answer.
const minDroppedGrants = 4

// lostAnswers runs 6 clients against bin through a proxy that loses answers, and checks the
// history with porcupine. It returns the result and the figures, and fails the test when the
// run lost fewer than minDroppedGrants grants (the Idempotency-Key went untested).
func lostAnswers(t *testing.T, bin string, d time.Duration) (porcupine.CheckResult, string) {
	s := start(t, bin, filepath.Join(t.TempDir(), "lk.db"))
	p := newLossyProxy(t, strings.TrimPrefix(s.url, "http://"), 0.15, 0.2, 0.05, 0.5)
	via := &server{t: t, url: "http://" + p.addr()}
	var mu sync.Mutex
	var history []porcupine.Operation
	start := time.Now()
	var wg sync.WaitGroup
	var retried atomic.Int64
	for i := range 6 {
		c := &linClient{id: i, proxy: via, direct: s, mu: &mu, history: &history, start: start, retriedGrants: &retried, droppedGrants: &p.droppedGrants}
		wg.Go(func() { c.run(d, 300*time.Millisecond) })
	}
	waitGroup(t, &wg, d+2*time.Minute)
	var unknown, acquires, granted int
	for _, op := range history {
		o := op.Output.(linOutput)
		if o.unknown {
			unknown++
		}
		if op.Input.(linInput).op == "acquire" {
			acquires++
			if o.status == http.StatusOK {
				granted++
			}
		}
	}
	res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
	if res == porcupine.Illegal {
		f := filepath.Join(t.TempDir(), "history.html")
		if err := porcupine.VisualizePath(linModel, info, f); err == nil {
			t.Logf("the history, drawn: %s", f)
		}
		explain(t, history, info)
	}
	fig := fmt.Sprintf("operations=%d unknown_outcomes=%d acquires=%d granted=%d acquires_retried=%d answers_dropped=%d grants_dropped=%d delayed=%d result=%s",
		len(history), unknown, acquires, granted, retried.Load(), p.dropped.Load(), p.droppedGrants.Load(), p.delayed.Load(), res)
	if n := p.droppedGrants.Load(); n < minDroppedGrants {
		t.Fatalf("the run lost %d grants' answers, want at least %d: the Idempotency-Key went untested (%s)", n, minDroppedGrants, fig)
	}
	return res, fig
}

// TestLostAnswers: with answers dropped and delayed after the server acted, and retries with
// Idempotency-Key, every answer the clients saw fits one order of the model above.
func TestLostAnswers(t *testing.T) {
	d := 3 * time.Second
	if long() {
		d = 60 * time.Second
	}
	res, fig := lostAnswers(t, binary(t), d)
	t.Log(fig)
	fmt.Println("FAULTS lost answers: " + fig)
	if res != porcupine.Ok {
		t.Fatalf("history not linearizable (%s)", res)
	}
}

// TestLostAnswersCatchesIgnoredIdempotencyKey is the negative control: a server that ignores
// Idempotency-Key answers a retried acquire lease_held against itself, which no order explains.
func TestLostAnswersCatchesIgnoredIdempotencyKey(t *testing.T) {
	bin := binary(t, mutation{file: "handlers/leases.go",
		find: "p.IdempotencyKey, err = auth.IdempotencyKey(s.auth.cfg.Secret, who, p.Name, p.IdempotencyKey)",
		repl: "p.IdempotencyKey = \"\""})
	res, fig := lostAnswers(t, bin, 3*time.Second)
	t.Logf("with Idempotency-Key ignored: %s", fig)
	if res != porcupine.Illegal {
		t.Fatalf("the check found the history linearizable (%s) with Idempotency-Key ignored", res)
	}
}

// explain logs the longest order the checker found and the operations it could not place
// after it, in call order.
func explain(t *testing.T, history []porcupine.Operation, info porcupine.LinearizationInfo) {
	t.Helper()
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	sorted := append([]porcupine.Operation(nil), history...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var all strings.Builder
	for _, op := range sorted {
		fmt.Fprintf(&all, "c%d %s [%d..%d ms]\n", op.ClientId, linModel.DescribeOperation(op.Input, op.Output), op.Input.(linInput).callMs%100000, op.Output.(linOutput).retMs%100000)
	}
	if f, err := os.CreateTemp("", "leasekeeper-history-*.txt"); err == nil {
		f.WriteString(all.String())
		f.Close()
		t.Logf("the history, in call order (kept for reading): %s", f.Name())
	}
	placed := map[int64]bool{}
	tail := longest[max(0, len(longest)-8):]
	for _, op := range tail {
		t.Logf("placed: c%d %s [%d..%d ms]", op.ClientId, linModel.DescribeOperation(op.Input, op.Output), op.Input.(linInput).callMs%100000, op.Output.(linOutput).retMs%100000)
	}
	for _, op := range longest {
		placed[op.Call] = true
	}
	n := 0
	for _, op := range history {
		if !placed[op.Call] && n < 8 {
			n++
			t.Logf("not placed: c%d %s [%d..%d ms]", op.ClientId, linModel.DescribeOperation(op.Input, op.Output), op.Input.(linInput).callMs%100000, op.Output.(linOutput).retMs%100000)
		}
	}
}
