package main

import (
	"errors"
	"flag"
	"fmt"
)

// commandHelp is what `leasekeeper CMD -h` says about CMD before its flags: the synopsis and
// what it does. Keyed by the flag set's name ("lock", "keys create").
var commandHelp = map[string]struct{ synopsis, about string }{
	"serve": {"serve [flags]", `Runs the server: the HTTP API, the dashboard and /metrics. Flags win over their environment
variables; durations need a unit (30s, 1m, 1h).`},
	"backup": {"backup --out FILE [--db FILE]", `Copies the SQLite database to FILE as one consistent snapshot, safe while serve runs. For
PostgreSQL, use pg_dump.`},
	"bench": {"bench --server URL[,URL…] [flags]", benchAbout},
	"health": {"health [--server URL]", `Asks the server whether it is ready (GET /readyz).
Exit status: 0 ready; 1 not ready, or no answer.`},
	"acquire": {"acquire [flags] NAME", `Takes the lease on NAME once and prints its lease_id and fencing token. Nothing renews it:
renew it with leasekeeper renew, or hold it with lock or run. Under a shared session (env
LEASEKEEPER_SESSION_ID, or --session-id-file) it lasts as long as the session, and --ttl does
not go with it.
Exit status: 0 granted; 75 held by somebody else (after --wait) or the server unreachable.`},
	"renew": {"renew --lease-id ID [flags] NAME", `Renews the lease on NAME: same token, a new expiry.
Exit status: 0 renewed; 1 the lease was lost (expired, released, revoked).`},
	"release": {"release --lease-id ID NAME", `Releases the lease on NAME.
Exit status: 0 released; 1 it had already ended (work done under it may have overlapped).`},
	"get":  {"get [flags] NAME", `Prints the state of the lease on NAME (never its lease_id).`},
	"list": {"list [--prefix P] [--state held|free] [--limit N] [--json]", `Lists leases, every page unless --limit.`},
	"leader": {"leader [--watch] [--json] NAME", `Prints who leads the election NAME (the holder of its lease); --watch follows every
change until Ctrl-C.`},
	"run": {"run --name NAME [flags] -- CMD [ARG]...", `Runs CMD while holding the lease on NAME (by default a lease of its own, --ttl 30s),
renewing it meanwhile. With several --name (or NAME,NAME), it holds every name, granted all or
none, and the loss of any of them stops CMD. If the lease is lost (revoked, expired, another holder granted), CMD
gets SIGTERM, then SIGKILL after --grace; a handover request reaches CMD as SIGTERM too, and
the lease is released once CMD exits. Signals sent to run are passed on to CMD's process group.

CMD gets, besides this environment:
  LEASEKEEPER_FENCING_TOKEN  the lease's fencing token: send it with every write it protects
  LEASEKEEPER_LEASE_NAME     NAME
  LEASEKEEPER_SLOT           the slot held of a semaphore (--limit N: 0 to N-1), or of a shared
                             lease (--shared); 0 otherwise
  LEASEKEEPER_SERVER         the server's URL
  LEASEKEEPER_FENCING_TOKENS every lease's NAME=TOKEN, space-separated (the first is the one above)

Under a session of its own (--session-ttl) or a shared one (env LEASEKEEPER_SESSION_ID, or
--session-id-file) the lease lasts as long as the session, and --ttl does not go with it.
Exit status: CMD's; 75 the lease is held (after --wait) or the server unreachable, CMD not
started; 122 the lease was lost while CMD ran; 127 CMD could not start.`},
	"lock": {"lock [flags] NAME...", `Holds the lease on NAME until Ctrl-C (SIGINT, SIGTERM), renewing it, then releases it, as
etcdctl lock NAME does without a command. It prints the grant; its token fences your writes
meanwhile. Several names are granted all or none (one grant each), and held until any is lost. To run a command under the lease, use leasekeeper run.
Exit status: 0 released; 75 the lease is held (after --wait) or the server unreachable;
122 the lease was lost while held.`},
	"elect": {"elect [flags] NAME PROPOSAL\n       leasekeeper elect --listen [--json] NAME", `Campaigns as PROPOSAL in the election NAME, prints a line when it leads, and leads until
Ctrl-C, then resigns, as etcdctl elect does. With --listen it prints the leader and every
change instead, as etcdctl elect -l does.
Exit status: 0 resigned; 122 leadership lost.`},
	"handover": {"handover [--to HOLDER] [--reason TEXT] NAME", `Asks the holder of the lease on NAME to let it go; nothing is forced. With --to, that holder
is granted next if it waits in line; --to naming the current holder is refused.`},
	"session": {"session open|close [flags]", `A session several commands share: session open prints its ID (a secret) for env
LEASEKEEPER_SESSION_ID; acquire, lock and run then hold their leases under it and keep it alive
while they run. See leasekeeper session open -h and leasekeeper session close -h.`},
	"session open": {"session open [--ttl 30s] [--holder H] [--metadata JSON] [--json]", `Opens a session and prints its ID (a secret: keep it in the environment, not on command
lines). It expires a ttl after the last command holding a lease under it stops renewing it.`},
	"session close": {"session close [--json]", `Closes the session env LEASEKEEPER_SESSION_ID (or --session-id-file) names, which releases
every lease held under it.`},
	"keys": {"keys create|list|revoke [flags]", `Manages API keys (an admin key only). See leasekeeper keys create -h.`},
	"keys create": {"keys create --label L --role reader|writer|admin [--prefix P]... [--json]", `Creates an API key and prints it; it is shown only now (the server keeps only its hash).
Without --prefix the key acts on every name.`},
	"keys list":   {"keys list [--json]", `Lists the API keys (never the keys themselves).`},
	"keys revoke": {"keys revoke ID", `Revokes the key ID: it stops working at once, on every request, stream and session.`},
}

// setUsage makes fs's -h print the help of the command fs names, then its flags.
func setUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		w := fs.Output()
		h := commandHelp[fs.Name()]
		fmt.Fprintf(w, "Usage: leasekeeper %s\n\n%s\n", h.synopsis, h.about)
		if hasFlags(fs) {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// usageError is an error in how a command was called: main prints it as one line and a
// pointer to the command's help.
type usageError struct {
	cmd string // "lock", "keys create"; "" for the program itself
	err error
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.err.Error() + "\nsee leasekeeper -h"
	}
	return e.err.Error() + "\nsee leasekeeper " + e.cmd + " -h"
}

func (e *usageError) Unwrap() error { return e.err }

// withHelpPointer adds "see leasekeeper CMD -h" to a usage error (exit 2) of command cmd.
func withHelpPointer(err error, cmd string) error {
	var ue *usageError
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || ee.child || errors.As(err, &ue) {
		return err
	}
	return &exitError{code: 2, err: &usageError{cmd: cmd, err: err}}
}

// helpName is the name of the command args call, as commandHelp keys it: "keys create" for
// a subcommand of keys or session, else the first argument; "" for none.
func helpName(args []string) string {
	if len(args) > 1 {
		if _, ok := commandHelp[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1]
		}
	}
	if len(args) > 0 {
		if _, ok := commandHelp[args[0]]; ok {
			return args[0]
		}
	}
	return ""
}
