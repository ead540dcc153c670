package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const benchAbout = `Drives a running server on this machine (loopback only) with -c keep-alive clients for -d per
mode and prints ops/s, latency percentiles and errors. Given several URLs (replicas on one
PostgreSQL database), it sends each request to the next of them in turn, as a round-robin load
balancer would. With --baseline it first runs the same
clients against a trivial JSON handler in this process and prints each result as a ratio to it.

With authentication on, set LEASEKEEPER_API_KEY to an admin key: admin keys are exempt from the
per-key rate limit (--key-rate, default 1000/s) and caps; a writer key is throttled by them, so
the figures would measure the limiter (or start the server with --key-rate 0).

Modes (comma-separated with --mode):
  cycle     acquire then release one name per client (one op = the pair)
  renew     renew one lease per client
  fenced    a 100-byte fenced write per client, with Fencing-Token and Lease-Name
  acquire   acquire a new name every time (ttl --ttl, 60 s unless set)
  contend   all clients acquire (and then release) among --names names; refusals count apart
  contend-wait  the same with wait_ms (--wait)
  watchers  cycle without, then with --watchers SSE watchers and --waiters waiting acquires;
            with --watchers-apart they are held by a second bench process at the lowest CPU
            priority (nice 19), so that reading their streams costs the writers' load
            generator less of this machine; each watcher watches every event of the writers,
            or with --watch-own only one writer's lease, as leasekeeper run follows its own
`

type benchConfig struct {
	servers  []*url.URL
	next     *atomic.Uint64 // the request count, which picks the server
	modes    []string
	clients  int
	dur      time.Duration
	baseline bool
	names    int
	ttl      time.Duration // of the acquire mode's leases
	wait     time.Duration
	watchers int
	waiters  int
	apart    bool
	own      bool // each watcher follows one writer's name
	key      string
}

func benchCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	setUsage(fs)
	server := fs.String("server", "", "the server's URL, e.g. http://127.0.0.1:8080 (loopback only); several, comma-separated, take turns")
	mode := fs.String("mode", "cycle,renew,fenced,acquire", "modes to run, comma-separated")
	var c benchConfig
	fs.IntVar(&c.clients, "c", 64, "concurrent clients")
	fs.DurationVar(&c.dur, "d", 8*time.Second, "duration of each run")
	fs.BoolVar(&c.baseline, "baseline", false, "first run the clients against a trivial in-process JSON handler and print ratios to it")
	fs.IntVar(&c.names, "names", 4, "names the contend modes share")
	fs.DurationVar(&c.ttl, "ttl", time.Minute, "ttl of the acquire mode's leases")
	fs.DurationVar(&c.wait, "wait", 2*time.Second, "wait_ms of contend-wait")
	fs.IntVar(&c.watchers, "watchers", 1000, "SSE watchers attached in the watchers mode")
	fs.IntVar(&c.waiters, "waiters", 1000, "acquires waiting in line in the watchers mode")
	fs.BoolVar(&c.own, "watch-own", false, "in the watchers mode, each watcher follows one writer's lease (as leasekeeper run does) instead of every event")
	fs.BoolVar(&c.apart, "watchers-apart", false, "hold the watchers mode's watchers and waiters in a second process at nice 19")
	attach := fs.String("attach", "", "") // internal: hold watchers of this tag for a parent bench
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	for _, s := range strings.Split(*server, ",") {
		u, err := url.Parse(s)
		if err != nil || s == "" || u.Scheme != "http" {
			return &exitError{code: 2, err: fmt.Errorf("--server must be an http:// URL, got %q", s)}
		}
		if !loopback(u.Host) {
			return &exitError{code: 2, err: fmt.Errorf("bench drives servers on this machine only: %q is not a loopback address", u.Host)}
		}
		c.servers = append(c.servers, u)
	}
	if c.clients < 1 || c.dur <= 0 || c.ttl <= 0 {
		return &exitError{code: 2, err: errors.New("-c, -d and --ttl must be positive")}
	}
	c.next, c.modes, c.key = new(atomic.Uint64), strings.Split(*mode, ","), getenv("LEASEKEEPER_API_KEY")
	for _, m := range c.modes {
		if benchModes[m] == nil && m != "watchers" {
			return &exitError{code: 2, err: fmt.Errorf("unknown mode %q", m)}
		}
	}
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 0, MaxIdleConnsPerHost: c.clients + c.watchers + c.waiters + 16,
		IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	defer hc.CloseIdleConnections()
	if *attach != "" {
		return (&bench{hc: hc, cfg: c, tag: *attach}).holdAttached(ctx, os.Stdin, stdout)
	}
	fmt.Fprintf(stdout, "%-14s %7s %10s %9s %9s %9s %9s %8s %7s %10s\n", "mode", "clients", "ops/s", "p50", "p90", "p99", "max", "errors", "ratio",
		"srv-cpu/op")
	var base float64
	if c.baseline {
		r, err := benchBaseline(ctx, hc, c)
		if err != nil {
			return err
		}
		base = r.rate()
		r.print(stdout, "baseline", c.clients, 0)
	}
	run := 0
	for _, m := range c.modes {
		run++
		b := &bench{hc: hc, cfg: c, tag: fmt.Sprintf("b%d-%d-%s", time.Now().UnixNano()%1e9, run, m)}
		if m == "watchers" {
			if err := b.watchersMode(ctx, stdout, base); err != nil {
				return err
			}
			continue
		}
		r, err := b.run(ctx, benchModes[m])
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		r.print(stdout, m, c.clients, base)
		if r.note != "" {
			fmt.Fprintf(stdout, "%-14s %s\n", "", r.note)
		}
	}
	return nil
}

// server returns the URL of the server the next request goes to: each in turn.
func (c benchConfig) server() string {
	return c.servers[c.next.Add(1)%uint64(len(c.servers))].String()
}

// serverList is the servers as --server takes them.
func (c benchConfig) serverList() string {
	list := make([]string, len(c.servers))
	for i, u := range c.servers {
		list[i] = u.String()
	}
	return strings.Join(list, ",")
}

// bench is one mode's run against the server.
type bench struct {
	hc  *http.Client
	cfg benchConfig
	tag string // makes this run's names its own
}

// worker is one client's loop body: setup once, then op until the run ends. op reports
// whether the operation was refused as expected under contention (counted apart, not an error).
type worker interface {
	setup(ctx context.Context) error
	op(ctx context.Context) (refused bool, err error)
}

var benchModes = map[string]func(b *bench, i int) worker{
	"cycle":        func(b *bench, i int) worker { return &cycleWorker{b: b, name: cycleName(b.tag, i)} },
	"renew":        func(b *bench, i int) worker { return &renewWorker{b: b, name: fmt.Sprintf("%s-%d", b.tag, i)} },
	"fenced":       func(b *bench, i int) worker { return &fencedWorker{b: b, name: fmt.Sprintf("%s-%d", b.tag, i)} },
	"acquire":      func(b *bench, i int) worker { return &acquireWorker{b: b, prefix: fmt.Sprintf("%s-%d-", b.tag, i)} },
	"contend":      func(b *bench, i int) worker { return &contendWorker{b: b} },
	"contend-wait": func(b *bench, i int) worker { return &contendWorker{b: b, wait: b.cfg.wait} },
}

// cycleName is the name the cycle mode's client i takes: of fixed width, so that it is the
// only name starting with itself, and a watcher of it as a prefix follows that one lease.
func cycleName(tag string, i int) string { return fmt.Sprintf("%s-%05d", tag, i) }

type result struct {
	ops, errs, refused int
	lat                []time.Duration
	elapsed            time.Duration
	firstErr           error
	note               string
	srvCPU             time.Duration // the servers' CPU time during the run; 0 when unknown
}

// cpuPerOp is the servers' CPU time per operation, "-" when unknown.
func (r result) cpuPerOp() string {
	if r.srvCPU <= 0 || r.ops == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(r.srvCPU.Microseconds())/float64(r.ops))
}

func (r result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func (r result) print(w io.Writer, mode string, clients int, base float64) {
	slices.Sort(r.lat)
	pct := func(p float64) string {
		if len(r.lat) == 0 {
			return "-"
		}
		return fmtDur(r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))])
	}
	ratio := "-"
	if base > 0 {
		ratio = fmt.Sprintf("%.2f", r.rate()/base)
	}
	fmt.Fprintf(w, "%-14s %7d %10.0f %9s %9s %9s %9s %8d %7s %10s\n", mode, clients, r.rate(), pct(.5), pct(.9), pct(.99), pct(1), r.errs, ratio,
		r.cpuPerOp())
	if r.refused > 0 {
		fmt.Fprintf(w, "%-14s %d of the ops were refused (lease_held): %.0f grants/s\n", "", r.refused, float64(r.ops-r.refused)/r.elapsed.Seconds())
	}
	if r.firstErr != nil {
		fmt.Fprintf(w, "%-14s first error: %v\n", "", r.firstErr)
	}
}

func fmtDur(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// run sets every worker up, then runs them together for the configured duration.
func (b *bench) run(ctx context.Context, mk func(b *bench, i int) worker) (result, error) {
	ws := make([]worker, b.cfg.clients)
	for i := range ws {
		ws[i] = mk(b, i)
		if err := ws[i].setup(ctx); err != nil {
			return result{}, fmt.Errorf("setup: %w", err)
		}
	}
	cpu0, ok0 := b.cfg.serverCPU(ctx, b.hc)
	r := runWorkers(ctx, ws, b.cfg.dur)
	if cpu1, ok1 := b.cfg.serverCPU(ctx, b.hc); ok0 && ok1 {
		r.srvCPU = cpu1 - cpu0
	}
	return r, nil
}

// serverCPU returns the CPU time the servers' processes have used so far, summed, as their
// /metrics say (process_cpu_seconds_total); false when one does not say. Divided by the
// operations of a run, it is the server's own cost per operation, apart from the load
// generator's, which shares the machine.
func (c benchConfig) serverCPU(ctx context.Context, hc *http.Client) (time.Duration, bool) {
	var total float64
	for _, u := range c.servers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("/metrics").String(), nil)
		if err != nil {
			return 0, false
		}
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, false
		}
		v, ok := processCPU(resp.Body)
		resp.Body.Close()
		if !ok || resp.StatusCode != http.StatusOK {
			return 0, false
		}
		total += v
	}
	return time.Duration(total * float64(time.Second)), true
}

// processCPU reads process_cpu_seconds_total from a Prometheus text exposition.
func processCPU(r io.Reader) (float64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "process_cpu_seconds_total" {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func runWorkers(ctx context.Context, ws []worker, dur time.Duration) result {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	parts := make([]result, len(ws))
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range ws {
		wg.Go(func() {
			r := &parts[i]
			r.lat = make([]time.Duration, 0, 1<<14)
			for ctx.Err() == nil {
				t := time.Now()
				refused, err := w.op(context.WithoutCancel(ctx))
				r.lat = append(r.lat, time.Since(t))
				r.ops++
				if refused {
					r.refused++
				}
				if err != nil {
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
				}
			}
		})
	}
	wg.Wait()
	out := result{elapsed: time.Since(start)}
	for _, p := range parts {
		out.ops += p.ops
		out.errs += p.errs
		out.refused += p.refused
		out.lat = append(out.lat, p.lat...)
		if out.firstErr == nil {
			out.firstErr = p.firstErr
		}
	}
	return out
}

// call sends one request and decodes a JSON answer into out (when not nil). A status other
// than want is an error carrying the status and the problem's code.
func (b *bench) call(ctx context.Context, method, path string, body []byte, hdr map[string]string, want int, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.cfg.server()+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.cfg.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.cfg.key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != want {
		var p struct{ Code string }
		json.Unmarshal(data, &p)
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, p.Code)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

type grantJSON struct {
	LeaseID string `json:"lease_id"`
	Token   int64  `json:"token"`
}

func (b *bench) acquire(ctx context.Context, name string, ttl, wait time.Duration) (grantJSON, int, error) {
	body := fmt.Sprintf(`{"holder":"bench","ttl_ms":%d`, ttl.Milliseconds())
	if wait > 0 {
		body += fmt.Sprintf(`,"wait_ms":%d`, wait.Milliseconds())
	}
	var g grantJSON
	code, err := b.call(ctx, http.MethodPost, "/v1/leases/"+name+"/acquire", []byte(body+"}"), nil, http.StatusOK, &g)
	return g, code, err
}

func (b *bench) release(ctx context.Context, name, id string) error {
	_, err := b.call(ctx, http.MethodPost, "/v1/leases/"+name+"/release", []byte(`{"lease_id":"`+id+`"}`), nil, http.StatusNoContent, nil)
	return err
}

type cycleWorker struct {
	b    *bench
	name string
}

func (w *cycleWorker) setup(context.Context) error { return nil }
func (w *cycleWorker) op(ctx context.Context) (bool, error) {
	g, _, err := w.b.acquire(ctx, w.name, 10*time.Second, 0)
	if err != nil {
		return false, err
	}
	return false, w.b.release(ctx, w.name, g.LeaseID)
}

type renewWorker struct {
	b    *bench
	name string
	id   string
}

func (w *renewWorker) setup(ctx context.Context) error {
	g, _, err := w.b.acquire(ctx, w.name, time.Minute, 0)
	w.id = g.LeaseID
	return err
}

func (w *renewWorker) op(ctx context.Context) (bool, error) {
	_, err := w.b.call(ctx, http.MethodPost, "/v1/leases/"+w.name+"/renew", []byte(`{"lease_id":"`+w.id+`"}`), nil, http.StatusOK, nil)
	return false, err
}

type fencedWorker struct {
	b     *bench
	name  string
	token string
}

var fencedValue = bytes.Repeat([]byte("v"), 100)

func (w *fencedWorker) setup(ctx context.Context) error {
	g, _, err := w.b.acquire(ctx, w.name, time.Hour, 0)
	if err != nil {
		return err
	}
	w.token = strconv.FormatInt(g.Token, 10)
	// The first write creates the resource (201); the measured ones write over it (200).
	return w.put(ctx, http.StatusCreated)
}

func (w *fencedWorker) op(ctx context.Context) (bool, error) {
	return false, w.put(ctx, http.StatusOK)
}

func (w *fencedWorker) put(ctx context.Context, want int) error {
	_, err := w.b.call(ctx, http.MethodPut, "/v1/resources/"+w.name, fencedValue,
		map[string]string{"Fencing-Token": w.token, "Lease-Name": w.name, "Content-Type": "application/octet-stream"}, want, nil)
	return err
}

type acquireWorker struct {
	b      *bench
	prefix string
	n      int
}

func (w *acquireWorker) setup(context.Context) error { return nil }
func (w *acquireWorker) op(ctx context.Context) (bool, error) {
	w.n++
	_, _, err := w.b.acquire(ctx, w.prefix+strconv.Itoa(w.n), w.b.cfg.ttl, 0)
	return false, err
}

type contendWorker struct {
	b    *bench
	wait time.Duration
}

func (w *contendWorker) setup(context.Context) error { return nil }
func (w *contendWorker) op(ctx context.Context) (bool, error) {
	name := fmt.Sprintf("%s-%d", w.b.tag, rand.IntN(w.b.cfg.names))
	g, code, err := w.b.acquire(ctx, name, 10*time.Second, w.wait)
	if code == http.StatusConflict {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, w.b.release(ctx, name, g.LeaseID)
}

// watchersMode runs cycle alone, then again with watchers streaming every event and waiters
// queued on held names, and reports what they cost the writers.
func (b *bench) watchersMode(ctx context.Context, stdout io.Writer, base float64) error {
	alone, err := b.run(ctx, benchModes["cycle"])
	if err != nil {
		return err
	}
	alone.print(stdout, "cycle", b.cfg.clients, base)
	wb := *b
	wb.tag += "-w"
	var events func() int64
	if b.cfg.apart {
		child, err := b.attachApart(ctx)
		if err != nil {
			return err
		}
		defer child.stop()
		events = child.stop
	} else {
		a, err := b.attach(ctx)
		if err != nil {
			return err
		}
		defer a.stop()
		events = a.stop
	}
	with, err := wb.run(ctx, benchModes["cycle"])
	if err != nil {
		return err
	}
	with.print(stdout, fmt.Sprintf("cycle+%dw+%dq", b.cfg.watchers, b.cfg.waiters), b.cfg.clients, base)
	where := "in this process"
	if b.cfg.apart {
		where = "in a second process at nice 19"
	}
	fmt.Fprintf(stdout, "%-14s with watchers and waiters (%s): %.2f of the writers' throughput alone; %d events streamed\n", "",
		where, with.rate()/alone.rate(), events())
	if alone.srvCPU > 0 && with.srvCPU > 0 && alone.ops > 0 && with.ops > 0 {
		a, w := alone.srvCPU.Seconds()/float64(alone.ops), with.srvCPU.Seconds()/float64(with.ops)
		fmt.Fprintf(stdout, "%-14s the server's CPU per cycle: %s alone, %s with them (%+.0f %%)\n", "", alone.cpuPerOp(), with.cpuPerOp(), 100*(w/a-1))
	}
	return nil
}

// attached is a set of watchers and waiters held open until stop, which returns how many
// events the watchers received.
type attached struct {
	stop func() int64
}

// attach opens the watchers of the tag b.tag+"-w" and the waiters on names held for the whole
// run (at most 1,000 per name by default), and returns once they are in place.
func (b *bench) attach(ctx context.Context) (attached, error) {
	bg, cancel := context.WithCancel(ctx)
	var events atomic.Int64
	var wg sync.WaitGroup
	stop := func() int64 {
		cancel()
		wg.Wait()
		return events.Load()
	}
	ready := make(chan error, b.cfg.watchers)
	for i := range b.cfg.watchers {
		prefix := b.tag + "-w" // every event of the cycle run with watchers (its tag)
		if b.cfg.own {
			prefix = cycleName(b.tag+"-w", i%b.cfg.clients)
		}
		wg.Go(func() { b.watch(bg, prefix, ready, &events) })
	}
	for range b.cfg.watchers {
		if err := <-ready; err != nil {
			stop()
			return attached{}, fmt.Errorf("attach watcher: %w", err)
		}
	}
	holders, tag := max(1, (b.cfg.waiters+499)/500), b.tag
	for i := range holders {
		if _, _, err := b.acquire(ctx, fmt.Sprintf("%s-held-%d", tag, i), time.Hour, 0); err != nil {
			stop()
			return attached{}, fmt.Errorf("hold a name for the waiters: %w", err)
		}
	}
	for i := range b.cfg.waiters {
		wg.Go(func() {
			name := fmt.Sprintf("%s-held-%d", tag, i%holders)
			for bg.Err() == nil {
				b.acquire(bg, name, time.Hour, time.Minute)
			}
		})
	}
	time.Sleep(time.Second) // let the waiters reach the line
	return attached{stop: stop}, nil
}

// holdAttached is the second process of --watchers-apart: it attaches, says "attached", holds
// until its standard input closes, then prints how many events its watchers received.
func (b *bench) holdAttached(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	a, err := b.attach(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "attached")
	io.Copy(io.Discard, stdin)
	fmt.Fprintf(stdout, "events %d\n", a.stop())
	return nil
}

// attachApart starts this program again as a bench --attach process at nice 19 (nice(1) sets
// it before the Go runtime starts its threads, which inherit it) and waits until it is attached.
func (b *bench) attachApart(ctx context.Context) (attached, error) {
	self, err := os.Executable()
	if err != nil {
		return attached{}, fmt.Errorf("find this program for --watchers-apart: %w", err)
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		return attached{}, fmt.Errorf("--watchers-apart needs nice(1): %w (or pass --watchers-apart=false)", err)
	}
	cmd := exec.CommandContext(ctx, nice, "-n", "19", self, "bench", "--server", b.cfg.serverList(), "--attach", b.tag,
		"--watchers", strconv.Itoa(b.cfg.watchers), "--waiters", strconv.Itoa(b.cfg.waiters), "-c", strconv.Itoa(b.cfg.clients),
		"--watch-own="+strconv.FormatBool(b.cfg.own))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return attached{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return attached{}, err
	}
	if err := cmd.Start(); err != nil {
		return attached{}, fmt.Errorf("start the watchers' process: %w", err)
	}
	lines := bufio.NewScanner(out)
	fail := func(err error) (attached, error) {
		in.Close()
		cmd.Wait()
		return attached{}, err
	}
	if !lines.Scan() || lines.Text() != "attached" {
		return fail(fmt.Errorf("the watchers' process did not attach (%q)", lines.Text()))
	}
	var once sync.Once
	var n int64
	return attached{stop: func() int64 {
		once.Do(func() {
			in.Close()
			if lines.Scan() {
				fmt.Sscanf(lines.Text(), "events %d", &n)
			}
			cmd.Wait()
		})
		return n
	}}, nil
}

// watch holds one SSE stream open, counting the events it receives.
func (b *bench) watch(ctx context.Context, prefix string, ready chan<- error, events *atomic.Int64) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.cfg.server()+"/v1/watch?prefix="+url.QueryEscape(prefix), nil)
	if err != nil {
		ready <- err
		return
	}
	if b.cfg.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.cfg.key)
	}
	resp, err := b.hc.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("GET /v1/watch: %d", resp.StatusCode)
	}
	ready <- err
	if err != nil {
		return
	}
	defer resp.Body.Close()
	// Count messages cheaply: this process shares the machine with the server it measures.
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		events.Add(int64(bytes.Count(buf[:n], []byte("\nid: "))))
		if err != nil {
			return
		}
	}
}

// benchBaseline runs the same number of clients against a trivial JSON handler served by this
// process on loopback: the ceiling of HTTP here, to which the other figures are compared.
func benchBaseline(ctx context.Context, hc *http.Client, c benchConfig) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "token": 1})
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	u, _ := url.Parse("http://" + ln.Addr().String())
	c.servers = []*url.URL{u}
	b := &bench{hc: hc, cfg: c}
	ws := make([]worker, c.clients)
	for i := range ws {
		ws[i] = &trivialWorker{b: b}
	}
	return runWorkers(ctx, ws, c.dur), nil
}

type trivialWorker struct{ b *bench }

func (w *trivialWorker) setup(context.Context) error { return nil }
func (w *trivialWorker) op(ctx context.Context) (bool, error) {
	_, err := w.b.call(ctx, http.MethodPost, "/trivial", []byte(`{"holder":"bench","ttl_ms":10000}`), nil, http.StatusOK, nil)
	return false, err
}
