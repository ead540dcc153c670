//go:build ignore

// A program for a fresh module, not for this one: scripts/clients-check.sh copies it (without
// the build line above) into an empty module next to a client that oapi-codegen generated
// from the served /openapi.yaml into package lkclient, and runs it against a live server.
// It drives a lease cycle, a fenced write and a stale write, and exits 1 on any surprise.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"example.com/lkcheck/lkclient"
)

func main() {
	if err := run(os.Getenv("LEASEKEEPER_SERVER"), os.Getenv("LEASEKEEPER_API_KEY")); err != nil {
		fmt.Fprintln(os.Stderr, "go client:", err)
		os.Exit(1)
	}
	fmt.Println("go client: lease cycle, fenced write and stale write as the spec says")
}

func run(server, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := lkclient.NewClientWithResponses(server, lkclient.WithRequestEditorFn(
		func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	const name, resource = "clients-go", "clients-go-report"

	// The first holder: acquire, renew, write with its token, release.
	first, err := c.AcquireLeaseWithResponse(ctx, name, nil, lkclient.AcquireRequest{Holder: "go-first", TtlMs: 10000})
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if first.JSON200 == nil {
		return fmt.Errorf("acquire answered %d %s, want 200 with a grant", first.StatusCode(), first.Body)
	}
	id, token := text(first.JSON200.LeaseId), first.JSON200.Token
	if id == "" || token <= 0 {
		return fmt.Errorf("acquire granted lease_id %q token %d", id, token)
	}
	renewed, err := c.RenewLeaseWithResponse(ctx, name, lkclient.RenewRequest{LeaseId: id})
	if err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	if renewed.JSON200 == nil || renewed.JSON200.Token != token {
		return fmt.Errorf("renew answered %d %s, want 200 with token %d", renewed.StatusCode(), renewed.Body, token)
	}
	if err := write(ctx, c, resource, token, "from the first holder", http.StatusOK); err != nil {
		return err
	}
	released, err := c.ReleaseLeaseWithResponse(ctx, name, lkclient.ReleaseRequest{LeaseId: id})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if released.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("release answered %d %s, want 204", released.StatusCode(), released.Body)
	}

	// The next holder writes with a higher token; the first one's late write is refused.
	second, err := c.AcquireLeaseWithResponse(ctx, name, nil, lkclient.AcquireRequest{Holder: "go-second", TtlMs: 10000})
	if err != nil {
		return fmt.Errorf("second acquire: %w", err)
	}
	if second.JSON200 == nil || second.JSON200.Token <= token {
		return fmt.Errorf("second acquire answered %d %s, want 200 with a token above %d", second.StatusCode(), second.Body, token)
	}
	if err := write(ctx, c, resource, second.JSON200.Token, "from the second holder", http.StatusOK); err != nil {
		return err
	}
	if err := write(ctx, c, resource, token, "late, from the first holder", http.StatusConflict); err != nil {
		return err
	}
	released, err = c.ReleaseLeaseWithResponse(ctx, name, lkclient.ReleaseRequest{LeaseId: text(second.JSON200.LeaseId)})
	if err != nil {
		return fmt.Errorf("second release: %w", err)
	}
	if released.StatusCode() != http.StatusNoContent {
		return fmt.Errorf("second release answered %d %s, want 204", released.StatusCode(), released.Body)
	}
	return nil
}

// write PUTs value to resource with token and checks the answer: 200 (201 when it creates it) with the token as the
// fence, or 409 stale_token with the fence it was below.
func write(ctx context.Context, c *lkclient.ClientWithResponses, resource string, token int64, value string, want int) error {
	resp, err := c.PutResourceWithBodyWithResponse(ctx, resource, &lkclient.PutResourceParams{FencingToken: &token},
		"text/plain", strings.NewReader(value))
	if err != nil {
		return fmt.Errorf("put %s with token %d: %w", resource, token, err)
	}
	switch {
	case want == http.StatusOK && resp.JSON200 != nil && resp.JSON200.Fence == token,
		want == http.StatusOK && resp.JSON201 != nil && resp.JSON201.Fence == token: // 201: the write created it
		return nil
	case want == http.StatusConflict && resp.ApplicationproblemJSON409 != nil &&
		resp.ApplicationproblemJSON409.Code == "stale_token":
		return nil
	}
	return fmt.Errorf("put %s with token %d answered %d %s, want %d", resource, token, resp.StatusCode(), resp.Body, want)
}

// text reads a string field whether the spec makes it required (string) or not (*string).
func text[T string | *string](v T) string {
	switch s := any(v).(type) {
	case string:
		return s
	case *string:
		if s != nil {
			return *s
		}
	}
	return ""
}
