package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// exTempFail is EX_TEMPFAIL from sysexits.h: the lease cannot be had right now.
const exTempFail = 75

// clientCommand runs one of the client commands (acquire, renew, release, get, list, run,
// leader) against a leasekeeper server.
func clientCommand(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch name {
	case "run":
		return runCommand(ctx, args, getenv, stdout, stderr)
	}
	cf := newClientFlags(name, getenv, stdout, stderr)
	var err error
	switch name {
	case "acquire":
		err = acquireCommand(ctx, cf, args, getenv, stdout)
	case "renew":
		err = renewCommand(ctx, cf, args, getenv, stdout)
	case "release":
		err = releaseCommand(ctx, cf, args, getenv, stdout)
	case "get":
		err = getCommand(ctx, cf, args, stdout)
	case "list":
		err = listCommand(ctx, cf, args, stdout)
	case "leader":
		err = leaderCommand(ctx, cf, args, stdout)
	case "lock":
		err = lockCommand(ctx, cf, args, getenv, stdout, stderr)
	case "elect":
		err = electCommand(ctx, cf, args, stdout, stderr)
	case "keys":
		err = keysCommand(ctx, cf, args, stdout)
	case "handover":
		err = handoverCommand(ctx, cf, args, stdout)
	case "session":
		err = sessionCommand(ctx, cf, args, getenv, stdout)
	default:
		err = &exitError{code: 2, err: fmt.Errorf("unknown client command %q", name)}
	}
	return err
}

// clientFlags are the flags every client command takes.
type clientFlags struct {
	fs      *flag.FlagSet
	stdout  io.Writer // for -h
	stderr  io.Writer // for usage errors
	server  string
	caFile  string
	json    bool
	verbose bool
	key     string // LEASEKEEPER_API_KEY
	keyFile string
}

func newClientFlags(name string, getenv func(string) string, stdout, stderr io.Writer) *clientFlags {
	cf := &clientFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	setUsage(cf.fs)
	server := getenv("LEASEKEEPER_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	cf.fs.StringVar(&cf.server, "server", server, "leasekeeper server URL (env LEASEKEEPER_SERVER)")
	cf.key = getenv("LEASEKEEPER_API_KEY")
	cf.fs.StringVar(&cf.keyFile, "api-key-file", getenv("LEASEKEEPER_API_KEY_FILE"), "a file holding the API key (default: env LEASEKEEPER_API_KEY; env LEASEKEEPER_API_KEY_FILE)")
	cf.fs.StringVar(&cf.caFile, "ca-file", getenv("LEASEKEEPER_CA_FILE"), "trust the server's certificate if signed by one in this PEM file (env LEASEKEEPER_CA_FILE)")
	// release prints no lease, but takes --json like the others, so a global flag never fails it.
	cf.fs.BoolVar(&cf.json, "json", false, "print JSON instead of a table")
	cf.fs.BoolVar(&cf.verbose, "verbose", false, "log what the client does (retries, reconnections, restarts seen) in log format, from debug up")
	return cf
}

// parse parses args and returns the lease name: the one positional argument (or the value
// of a --name flag the command defined).
func (cf *clientFlags) parse(args []string, nameFlag *string) (string, error) {
	rest, err := cf.parseAll(args)
	if err != nil {
		return "", err
	}
	name := ""
	if nameFlag != nil {
		name = *nameFlag
	}
	switch {
	case len(rest) == 1 && name == "":
		name = rest[0]
	case len(rest) > 1 || len(rest) == 1 && name != "":
		return "", &exitError{code: 2, err: fmt.Errorf("%s: one lease name expected, got %q", cf.fs.Name(), rest)}
	}
	if name == "" && nameFlag != nil {
		return "", &exitError{code: 2, err: fmt.Errorf("%s: a lease name is required", cf.fs.Name())}
	}
	return name, nil
}

// parseAll parses args with flags before, between or after the positional arguments, as
// `leasekeeper get job --json` is written, and returns the positional ones. After a literal
// "--" everything is positional.
func (cf *clientFlags) parseAll(args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(cf.fs, args, cf.stdout); err != nil {
			return nil, err
		}
		rest := cf.fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" || len(rest) == 0 {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// noArgs parses the flags of cmd, which takes no positional arguments.
func (cf *clientFlags) noArgs(args []string, cmd string) error {
	rest, err := cf.parseAll(args)
	if err == nil && len(rest) > 0 {
		err = &exitError{code: 2, err: fmt.Errorf("%s takes no arguments, got %q", cmd, rest)}
	}
	return err
}

func (cf *clientFlags) client(stderr io.Writer, opts ...client.Option) (*client.Client, error) {
	if stderr != nil {
		opts = append(opts, client.WithLogger(cliLogger(stderr, cf.fs.Name(), cf.verbose)))
	}
	key, err := cf.apiKey()
	if err != nil {
		return nil, err
	}
	if key != "" {
		opts = append(opts, client.WithAPIKey(key))
	}
	if cf.caFile != "" {
		hc, err := caClient(cf.caFile)
		if err != nil {
			return nil, &exitError{code: 2, err: err}
		}
		opts = append(opts, client.WithHTTPClient(hc))
	}
	c, err := client.New(cf.server, opts...)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// apiKey is the key every request sends: from --api-key-file, else LEASEKEEPER_API_KEY.
func (cf *clientFlags) apiKey() (string, error) {
	if cf.keyFile == "" {
		return cf.key, nil
	}
	return readSecretFile("--api-key-file", cf.keyFile)
}

// defaultHolder names this process for humans: user@host (pid N).
func defaultHolder(getenv func(string) string) string {
	if h := getenv("LEASEKEEPER_HOLDER"); h != "" {
		return h
	}
	name := "leasekeeper"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s (pid %d)", name, host, os.Getpid())
}

// fail is cliError for a command's request, a duration outside the server's bounds reported
// in the unit the user typed.
func (cf *clientFlags) fail(err error) error { return cliError(inUserUnits(err, cf.fs)) }

// cliError gives a client error its exit code: 75 when the lease cannot be had now (held, or
// the server cannot be reached), 2 for a request that breaks the contract's rules (a bad
// name, a ttl outside the bounds), 1 otherwise. An error that has its code keeps it.
func cliError(err error) error {
	var ae *client.APIError
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return err
	case errors.Is(err, client.ErrInvalid):
		return &exitError{code: 2, err: err}
	case errors.Is(err, client.ErrLeaseHeld):
		return &exitError{code: exTempFail, err: err}
	case errors.As(err, &ae):
		if ae.Status >= 500 || ae.Status == 429 {
			return &exitError{code: exTempFail, err: err}
		}
		return &exitError{code: 1, err: err}
	case errors.Is(err, client.ErrLeaseLost), errors.Is(err, context.Canceled):
		return &exitError{code: 1, err: err}
	}
	return &exitError{code: exTempFail, err: err} // the network: try again later
}

// leaseFlags are the flags of the commands that acquire a lease: acquire, run and lock.
type leaseFlags struct {
	ttl       *time.Duration
	holder    *string
	wait      *time.Duration
	lockDelay *time.Duration
	metadata  *string
	shared    *bool
}

func addLeaseFlags(fs *flag.FlagSet, getenv func(string) string, ttlUsage string) *leaseFlags {
	return &leaseFlags{
		ttl:       duration(fs, "ttl", 30*time.Second, ttlUsage),
		holder:    fs.String("holder", defaultHolder(getenv), "who holds it, for humans (env LEASEKEEPER_HOLDER)"),
		wait:      duration(fs, "wait", 0, "how long to wait for a lease somebody else holds (then exit 75)"),
		lockDelay: duration(fs, "lock-delay", 0, "after this lease expires, keep the name from others this long"),
		metadata:  fs.String("metadata", "", "a JSON object shown with the lease"),
		shared:    fs.Bool("shared", false, "a shared (read) lease: held beside other shared ones, never beside an exclusive one; its token does not write"),
	}
}

// options are the acquire options the flags ask for, after parsing.
func (lf *leaseFlags) options() (client.AcquireOptions, error) {
	md, err := parseMetadata(*lf.metadata)
	return client.AcquireOptions{Holder: *lf.holder, TTL: *lf.ttl, Wait: *lf.wait, LockDelay: *lf.lockDelay, Metadata: md,
		Shared: *lf.shared}, err
}

// acquire connects and acquires names (several: all or none) with the options the flags ask
// for, changed by edit if it is not nil. On success the caller closes the client; on failure
// it is closed, and the error has its exit code.
func (lf *leaseFlags) acquire(ctx context.Context, cf *clientFlags, names []string, logTo io.Writer, edit func(*client.AcquireOptions)) (*client.Client, []*client.Lease, error) {
	o, err := lf.options()
	if err != nil {
		return nil, nil, err
	}
	if edit != nil {
		edit(&o)
	}
	c, err := cf.client(logTo)
	if err != nil {
		return nil, nil, err
	}
	ls, err := acquireNames(ctx, c, names, o)
	if err != nil {
		c.Close()
		return nil, nil, cf.fail(err)
	}
	return c, ls, nil
}

// acquirer takes leases: a Client, or a Session for leases under it.
type acquirer interface {
	Acquire(ctx context.Context, name string, o client.AcquireOptions) (*client.Lease, error)
	AcquireAll(ctx context.Context, names []string, o client.AcquireOptions) ([]*client.Lease, error)
}

// acquireNames acquires names from a: one name as a lease of its own, several all or none.
func acquireNames(ctx context.Context, a acquirer, names []string, o client.AcquireOptions) ([]*client.Lease, error) {
	if len(names) > 1 {
		return a.AcquireAll(ctx, names, o)
	}
	l, err := a.Acquire(ctx, names[0], o)
	if err != nil {
		return nil, err
	}
	return []*client.Lease{l}, nil
}

// releaseAll gives back every lease of ls.
func releaseAll(ls []*client.Lease) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, l := range ls {
			errs = append(errs, l.Release(ctx))
		}
		return errors.Join(errs...)
	}
}

// sessionFlags choose the session a command holds its lease under: none (a lease of its own
// --ttl), one of its own (--session-ttl, run and lock), or one shared with other processes,
// named by its secret ID (env LEASEKEEPER_SESSION_ID, or --session-id-file): the command
// keeps a shared session alive while it runs, gives back only its own lease, and never closes it.
type sessionFlags struct {
	ttl    *time.Duration
	id     string // LEASEKEEPER_SESSION_ID
	idFile *string
}

// addSessionFlags defines the session flags; own adds --session-ttl.
func addSessionFlags(fs *flag.FlagSet, getenv func(string) string, own bool) *sessionFlags {
	sf := &sessionFlags{ttl: new(time.Duration), id: getenv("LEASEKEEPER_SESSION_ID"),
		idFile: fs.String("session-id-file", getenv("LEASEKEEPER_SESSION_ID_FILE"),
			"a file holding the ID of the shared session (default: env LEASEKEEPER_SESSION_ID; env LEASEKEEPER_SESSION_ID_FILE)")}
	if own {
		sf.ttl = duration(fs, "session-ttl", 0, "hold the lease under a session of this duration, renewed at a third of it and closed on exit "+
			"(which releases the lease in the same transaction), instead of a lease of its own --ttl")
	}
	return sf
}

// sharedID is the ID of the shared session asked for: from --session-id-file, else
// LEASEKEEPER_SESSION_ID; "" for none.
func (sf *sessionFlags) sharedID() (string, error) {
	if *sf.idFile == "" {
		return strings.TrimSpace(sf.id), nil
	}
	return readSecretFile("--session-id-file", *sf.idFile)
}

// readSecretFile reads a one-line secret (a key, a session ID) from the file a flag names.
func readSecretFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &exitError{code: 2, err: fmt.Errorf("%s: %w", flagName, err)}
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", &exitError{code: 2, err: fmt.Errorf("%s %s is empty", flagName, path)}
	}
	return v, nil
}

// hold is acquire (of several names: all or none), under the session sf asks for, if any: a
// session's keepalive keeps the leases. giveBack closes a session of the command's own (releasing the lease with it); under a
// shared session it releases the lease alone and stops keeping the session alive, leaving the
// session and the other processes' leases as they are. --ttl does not go with a session,
// whose duration is the lease's.
func (lf *leaseFlags) hold(ctx context.Context, cf *clientFlags, names []string, sf *sessionFlags, logTo io.Writer,
	edit func(*client.AcquireOptions)) (c *client.Client, ls []*client.Lease, giveBack func(context.Context) error, err error) {
	shared, err := sf.sharedID()
	if err != nil {
		return nil, nil, nil, err
	}
	if shared == "" && *sf.ttl <= 0 {
		c, ls, err = lf.acquire(ctx, cf, names, logTo, edit)
		if err != nil {
			return nil, nil, nil, err
		}
		return c, ls, releaseAll(ls), nil
	}
	switch {
	case shared != "" && *sf.ttl > 0:
		return nil, nil, nil, &exitError{code: 2, err: errors.New("--session-ttl opens a session of this command's own, " +
			"LEASEKEEPER_SESSION_ID (or --session-id-file) names a shared one: give one of them")}
	case given(cf.fs, "ttl"):
		return nil, nil, nil, &exitError{code: 2, err: errors.New("--ttl does not go with a session: a lease under a session lasts as long as the session")}
	}
	o, err := lf.options()
	if err != nil {
		return nil, nil, nil, err
	}
	if edit != nil {
		edit(&o)
	}
	if c, err = cf.client(logTo); err != nil {
		return nil, nil, nil, err
	}
	var s *client.Session
	if shared != "" {
		s, err = c.AttachSession(ctx, shared)
	} else {
		s, err = c.OpenSession(ctx, client.SessionOptions{Holder: o.Holder, TTL: *sf.ttl})
	}
	if err == nil {
		if ls, err = acquireNames(ctx, s, names, o); err != nil {
			if shared != "" {
				s.Detach()
			} else {
				// Nothing is held under it: close it now rather than let it linger until it expires.
				s.Close(context.WithoutCancel(ctx))
			}
		}
	}
	if err != nil {
		c.Close()
		return nil, nil, nil, cf.fail(err)
	}
	if shared == "" {
		return c, ls, s.Close, nil
	}
	return c, ls, func(ctx context.Context) error {
		defer s.Detach()
		return releaseAll(ls)(ctx)
	}, nil
}

// given reports whether the flag name was given on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseMetadata reads a --metadata flag: empty for none, else a JSON object.
func parseMetadata(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(s), &md); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--metadata must be a JSON object: %w", err)}
	}
	return md, nil
}

// writeGrant prints a grant as JSON or as a table.
func writeGrant(w io.Writer, l *client.Lease, asJSON bool) error {
	out := leaseJSON{Name: l.Name(), Holder: l.Holder(), LeaseID: l.ID(), Token: l.Token(), TTLMs: l.TTL().Milliseconds(),
		ExpiresAt: l.ExpiresAt()}
	if l.Shared() {
		out.Mode = "shared"
	}
	if asJSON {
		return writeJSON(w, out)
	}
	kv := [][2]string{
		{"lease_id", out.LeaseID}, {"token", fmt.Sprint(out.Token)}, {"name", out.Name}, {"holder", out.Holder},
		{"expires_at", fmtTime(out.ExpiresAt)},
	}
	if out.Mode != "" {
		kv = append(kv, [2]string{"mode", out.Mode})
	}
	return writeKV(w, kv)
}

func acquireCommand(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	lf := addLeaseFlags(cf.fs, getenv, "lease duration")
	key := cf.fs.String("idempotency-key", "", "a key that makes retries of this acquire return the first grant")
	sf := addSessionFlags(cf.fs, getenv, false)
	name, err := cf.parse(args, new(string))
	if err != nil {
		return err
	}
	// Under a shared session the lease lives as long as the session: the processes that keep
	// it alive keep the lease. Closing the client stops this one's keepalive and closes nothing.
	c, ls, _, err := lf.hold(ctx, cf, []string{name}, sf, nil, func(o *client.AcquireOptions) {
		o.IdempotencyKey, o.DisableKeepAlive = *key, true
	})
	if err != nil {
		return err
	}
	defer c.Close()
	return writeGrant(stdout, ls[0], cf.json)
}

func renewCommand(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	id := cf.fs.String("lease-id", getenv("LEASEKEEPER_LEASE_ID"), "the lease_id from acquire (env LEASEKEEPER_LEASE_ID)")
	ttl := duration(cf.fs, "ttl", 0, "a new ttl; 0 keeps the lease's")
	name, err := cf.parse(args, new(string))
	if err != nil {
		return err
	}
	if *id == "" {
		return &exitError{code: 2, err: errors.New("renew: --lease-id is required")}
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	g, err := c.Renew(ctx, name, *id, *ttl)
	if err != nil {
		return cf.fail(err)
	}
	out := leaseJSON{Name: g.Name, Holder: g.Holder, Token: g.Token, TTLMs: g.TTL.Milliseconds(), ExpiresAt: g.ExpiresAt}
	if cf.json {
		return writeJSON(stdout, out)
	}
	return writeKV(stdout, [][2]string{{"token", fmt.Sprint(g.Token)}, {"name", g.Name}, {"expires_at", fmtTime(g.ExpiresAt)}})
}

func releaseCommand(ctx context.Context, cf *clientFlags, args []string, getenv func(string) string, stdout io.Writer) error {
	id := cf.fs.String("lease-id", getenv("LEASEKEEPER_LEASE_ID"), "the lease_id from acquire (env LEASEKEEPER_LEASE_ID)")
	name, err := cf.parse(args, new(string))
	if err != nil {
		return err
	}
	if *id == "" {
		return &exitError{code: 2, err: errors.New("release: --lease-id is required")}
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	if err := c.Release(ctx, name, *id); err != nil {
		// lease_lost answers both a lease that ended and a lease_id the server never issued;
		// the server's detail says which, so nothing is added here that might be untrue.
		return cliError(err)
	}
	fmt.Fprintf(stdout, "released %s\n", name)
	return nil
}

// handoverCommand asks the holder of a lease to let it go (cooperative handover).
func handoverCommand(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error {
	to := cf.fs.String("to", "", "the holder to grant next, if it waits in line")
	reason := cf.fs.String("reason", "", "why, for the holder and the history")
	name, c, err := cf.nameAndClient(args)
	if err != nil {
		return err
	}
	h, err := c.RequestHandover(ctx, name, *to, *reason)
	if err != nil {
		return cliError(err)
	}
	if cf.json {
		return writeJSON(stdout, h)
	}
	return writeKV(stdout, [][2]string{{"name", h.Name}, {"token", fmt.Sprint(h.Token)}, {"to", h.To}, {"requested_at", fmtTime(h.At)}})
}

// nameAndClient parses a command's flags and its one lease name, and makes the client.
func (cf *clientFlags) nameAndClient(args []string) (string, *client.Client, error) {
	name, err := cf.parse(args, new(string))
	if err != nil {
		return "", nil, err
	}
	c, err := cf.client(nil)
	return name, c, err
}

func getCommand(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error {
	name, c, err := cf.nameAndClient(args)
	if err != nil {
		return err
	}
	st, err := c.Get(ctx, name)
	if err != nil {
		return cliError(err)
	}
	if cf.json {
		return writeJSON(stdout, stateJSONOf(st))
	}
	return writeStates(stdout, []client.State{st})
}

func listCommand(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error {
	prefix := cf.fs.String("prefix", "", "only names that start with this")
	state := cf.fs.String("state", "", "held or free; empty for both")
	limit := cf.fs.Int("limit", 0, "at most this many (one page); 0 lists all")
	if err := cf.noArgs(args, "list"); err != nil {
		return err
	}
	if *state != "" && *state != "held" && *state != "free" {
		return &exitError{code: 2, err: fmt.Errorf("--state must be held or free, not %q", *state)}
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	var all []client.State
	next := ""
	for {
		page, err := c.List(ctx, client.ListOptions{Prefix: *prefix, State: *state, Limit: *limit, Cursor: next})
		if err != nil {
			return cliError(err)
		}
		all = append(all, page.Leases...)
		next = page.NextCursor
		if next == "" || *limit > 0 {
			break
		}
	}
	if cf.json {
		out := struct {
			Leases     []stateJSON `json:"leases"`
			NextCursor string      `json:"next_cursor"`
		}{Leases: []stateJSON{}, NextCursor: next}
		for _, s := range all {
			out.Leases = append(out.Leases, stateJSONOf(s))
		}
		return writeJSON(stdout, out)
	}
	return writeStates(stdout, all)
}

// leaseJSON is a grant as the commands print it: the wire names of openapi.yaml.
type leaseJSON struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"`
	LeaseID   string    `json:"lease_id,omitempty"`
	Token     int64     `json:"token"`
	TTLMs     int64     `json:"ttl_ms"`
	ExpiresAt time.Time `json:"expires_at"`
	Mode      string    `json:"mode,omitempty"` // "shared" for a shared lease
}

// stateJSON is a lease state as the commands print it.
type stateJSON struct {
	Name        string         `json:"name"`
	Held        bool           `json:"held"`
	Holder      string         `json:"holder"`
	Token       int64          `json:"token"`
	TTLMs       int64          `json:"ttl_ms"`
	LockDelayMs int64          `json:"lock_delay_ms"`
	AcquiredAt  *time.Time     `json:"acquired_at,omitempty"`
	ExpiresAt   *time.Time     `json:"expires_at,omitempty"`
	EndedAt     *time.Time     `json:"ended_at,omitempty"`
	End         string         `json:"end,omitempty"`
	AvailableAt *time.Time     `json:"available_at,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Waiters     int            `json:"waiters"`
}

func stateJSONOf(s client.State) stateJSON {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return stateJSON{Name: s.Name, Held: s.Held, Holder: s.Holder, Token: s.Token, TTLMs: s.TTL.Milliseconds(),
		LockDelayMs: s.LockDelay.Milliseconds(), AcquiredAt: opt(s.AcquiredAt), ExpiresAt: opt(s.ExpiresAt),
		EndedAt: opt(s.EndedAt), End: s.End, AvailableAt: opt(s.AvailableAt), Metadata: s.Metadata, Waiters: s.Waiters}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeKV(w io.Writer, rows [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

func writeStates(w io.Writer, states []client.State) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOLDER\tTOKEN\tEXPIRES/ENDED\tWAITERS")
	for _, s := range states {
		state, when := "held", fmtTime(s.ExpiresAt)
		if !s.Held {
			state, when = "free", fmtTime(s.EndedAt)
			if s.End != "" {
				state = "free (" + s.End + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", s.Name, state, s.Holder, s.Token, when, s.Waiters)
	}
	return tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// splitDashDash splits args at the first literal "--": flag's own handling of "--" cannot
// tell run's flags from a command that itself takes "--".
func splitDashDash(args []string) (flags, cmd []string, found bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}
