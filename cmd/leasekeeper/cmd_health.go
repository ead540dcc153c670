package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// healthCommand asks a server whether it is ready (GET /readyz) and exits 0 when it is, 1 when
// it is not or cannot be reached: a container HEALTHCHECK for an image without curl.
func healthCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cf := newClientFlags("health", getenv, stdout, stderr)
	timeout := duration(cf.fs, "timeout", 5*time.Second, "how long to wait for the answer")
	rest, err := cf.parseAll(args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return &exitError{code: 2, err: fmt.Errorf("health takes no arguments, got %q", rest)}
	}
	hc := &http.Client{}
	if cf.caFile != "" {
		if hc, err = caClient(cf.caFile); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	hc.Timeout = *timeout
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cf.server, "/")+"/readyz", nil)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("health: %w", err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return &exitError{code: 1, err: fmt.Errorf("health: %s answered %s: %s", req.URL, resp.Status, strings.TrimSpace(string(body)))}
	}
	fmt.Fprintln(stdout, "ready")
	return nil
}
