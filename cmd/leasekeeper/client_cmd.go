package main

import (
	"context"
	"fmt"
	"io"
)

// clientCommand runs one of the client commands (acquire, renew, release, get, list, run,
// leader) against a leasekeeper server.
func clientCommand(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return &exitError{code: 2, err: fmt.Errorf("the %s command is not built yet", name)}
}
