// Command election is a candidate in a leader election: run several against one leasekeeper
// and kill the leader's process to watch a follower take over with a higher fencing token.
//
//	go run ./examples/election -name node-1 -addr 10.0.0.1:9000
//
// It prints one line per change: "leading token=N", "stopped leading", "leader NAME token=N
// addr=A". The API key, when the server needs one, comes from LEASEKEEPER_API_KEY.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "election:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("election", flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "leasekeeper URL")
	election := fs.String("election", "leader", "the lease name the candidates compete for")
	name := fs.String("name", "", "this candidate's name (required)")
	addr := fs.String("addr", "", "address published to followers as metadata")
	ttl := fs.Duration("ttl", 2*time.Second, "term length; a dead leader is replaced within about this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("-name is required")
	}
	var opts []client.Option
	if k := os.Getenv("LEASEKEEPER_API_KEY"); k != "" {
		opts = append(opts, client.WithAPIKey(k))
	}
	c, err := client.New(*server, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	e := c.NewElection(*election, client.ElectionOptions{Candidate: *name, TTL: *ttl, Metadata: map[string]any{"addr": *addr}})
	err = e.Run(ctx, client.RunOptions{
		ReleaseOnCancel: true,
		OnStartedLeading: func(ctx context.Context, term *client.Lease) {
			say("leading token=%d", term.Token())
			<-ctx.Done() // a real leader works here, sending token with every write
		},
		OnStoppedLeading: func() { say("stopped leading") },
		OnNewLeader: func(l client.Leader) {
			say("leader %s token=%d addr=%v", l.Holder, l.Token, l.Metadata["addr"])
		},
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
