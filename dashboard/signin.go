package dashboard

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/lease"
)

// maxSignInAddrs bounds the client addresses whose sign-in rate is remembered. Past it the
// table starts again empty: a flood from many addresses costs each a fresh burst, never the
// server's memory.
const maxSignInAddrs = 10000

// Failed sign-ins are logged at most this often, with a burst: a guessing client must not fill
// the log. The lines left out are counted in the next one.
const (
	refusedLogRate  rate.Limit = 1
	refusedLogBurst int        = 10
)

// signInGuard bounds sign-in attempts by client address, and the log lines of refused ones.
type signInGuard struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	byAddr  map[string]*rate.Limiter
	logs    *rate.Limiter
	dropped int // refused sign-ins not logged since the last line
}

func newSignInGuard(r rate.Limit, burst int) *signInGuard {
	return &signInGuard{rate: r, burst: max(1, burst), byAddr: map[string]*rate.Limiter{},
		logs: rate.NewLimiter(refusedLogRate, refusedLogBurst)}
}

// allow takes one sign-in attempt of the client at remote (host:port). Codes: rate_limited.
func (g *signInGuard) allow(remote string) error {
	if g.rate == 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	g.mu.Lock()
	l, ok := g.byAddr[host]
	if !ok {
		if len(g.byAddr) >= maxSignInAddrs {
			clear(g.byAddr)
		}
		l = rate.NewLimiter(g.rate, g.burst)
		g.byAddr[host] = l
	}
	g.mu.Unlock()
	if l.Allow() {
		return nil
	}
	return &lease.Error{Code: lease.CodeRateLimited, Message: fmt.Sprintf("more than %g sign-ins a second came from %s (burst %d)", float64(g.rate), host, g.burst)}
}

// retryAfter is the Retry-After of a refused attempt: the time one attempt takes to come back.
func (g *signInGuard) retryAfter() int {
	if g.rate <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/float64(g.rate))))
}

// logRefused reports whether a refused sign-in is logged now, and how many were left out
// before it.
func (g *signInGuard) logRefused() (ok bool, dropped int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.logs.Allow() {
		g.dropped++
		return false, 0
	}
	dropped, g.dropped = g.dropped, 0
	return true, dropped
}

// tooMany answers a sign-in refused for its rate on the sign-in page.
func (d *dashboard) tooMany(w http.ResponseWriter, r *http.Request, err error, retry int) {
	w.Header().Set("Retry-After", fmt.Sprint(retry))
	d.fail(w, r, err)
}
