package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `leasekeeper: leases with fencing tokens over HTTP/JSON.

Usage: leasekeeper COMMAND [flags] [args]   (leasekeeper COMMAND -h: what it does, its flags)

The server:
  serve      run the server
  backup     copy the SQLite database consistently, even while serve runs
  bench      load-test a server on this machine
Client commands (the server: --server or env LEASEKEEPER_SERVER; the key: env LEASEKEEPER_API_KEY
or --api-key-file):
  acquire    take a lease once and print its lease_id and token
  renew      renew a lease
  release    release a lease
  get        print a lease's state
  list       list leases
  run        run a command while holding a lease
  lock       hold a lease until Ctrl-C
  elect      campaign in an election and lead until Ctrl-C, or --listen
  leader     print who leads an election
  handover   ask the holder of a lease to let it go
  session    open or close a session several commands share
  keys       create, list or revoke API keys (admin)
  health     exit 0 when the server is ready, else 1
  version    print the version
`

// exitError carries an exit code out of run.
type exitError struct {
	code  int
	err   error
	child bool // code is the status of run's command, not leasekeeper's verdict
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// run is the whole program: main only adds the process around it. Asking a command for its
// flags (-h) is not an error.
// A usage error says where the help is.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return nil
	}
	_, rest, _ := splitGlobal(args)
	return withHelpPointer(err, helpName(rest))
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2, err: errors.New("no command given")}
	}
	global, args, err := splitGlobal(args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2, err: errors.New("no command given")}
	}
	switch args[0] {
	case "acquire", "renew", "release", "get", "list", "run", "leader", "lock", "elect", "keys", "health", "handover", "session":
	default:
		if len(global) > 0 {
			return &exitError{code: 2, err: fmt.Errorf("%s belongs to the client commands, not %q", global[0], args[0])}
		}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "acquire", "renew", "release", "get", "list", "run", "leader", "lock", "elect", "keys", "handover", "session":
		return clientCommand(ctx, args[0], withGlobal(args[0], global, args[1:]), getenv, stdout, stderr)
	case "health":
		return healthCommand(ctx, withGlobal(args[0], global, args[1:]), getenv, stdout, stderr)
	case "backup":
		return backupCommand(ctx, args[1:], getenv, stdout, stderr)
	case "bench":
		return benchCommand(ctx, args[1:], getenv, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "leasekeeper", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown command %q", args[0])}
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return version
}

// globalFlag reports whether name is a client flag that may also come before the command
// name, and whether it takes a value.
func globalFlag(name string) (ok, takesValue bool) {
	switch name {
	case "server", "api-key-file", "ca-file":
		return true, true
	case "json", "verbose":
		return true, false
	}
	return false, false
}

// splitGlobal takes the client flags that come before the command name off args, so that
// `leasekeeper --server URL get job` means `leasekeeper get --server URL job`.
func splitGlobal(args []string) (global, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		ok, takesValue := globalFlag(name)
		if !ok {
			break
		}
		global, args = append(global, args[0]), args[1:]
		if takesValue && !hasValue {
			if len(args) == 0 {
				return nil, nil, &exitError{code: 2, err: fmt.Errorf("flag needs an argument: -%s", name)}
			}
			global, args = append(global, args[0]), args[1:]
		}
	}
	return global, args, nil
}

// withGlobal puts the global flags given before the command name where the command parses
// its flags: after the subcommand of keys and session, else first.
func withGlobal(cmd string, global, args []string) []string {
	if len(global) == 0 {
		return args
	}
	if (cmd == "keys" || cmd == "session") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return append([]string{args[0]}, append(global, args[1:]...)...)
	}
	return append(append([]string(nil), global...), args...)
}
