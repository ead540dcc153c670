package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/client"
)

// TestDoReleasesWhenFnPanics panics inside Do's function and checks the panic reaches the
// caller unchanged and the name is free the moment it does.
func TestDoReleasesWhenFnPanics(t *testing.T) {
	c := newClient(t, newServer(t))
	ctx := context.Background()
	var token int64
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the function's panic \"boom\"", r)
			}
		}()
		client.Do(ctx, c, "job", client.AcquireOptions{TTL: time.Minute}, func(_ context.Context, tok int64) error {
			token = tok
			panic("boom")
		})
		t.Error("Do returned instead of panicking")
	}()
	st, err := c.Get(ctx, "job")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if diff := cmp.Diff([]any{false, token, "released"}, []any{st.Held, st.Token, st.End}); diff != "" {
		t.Errorf("state right after the panic (-want +got):\n%s", diff)
	}
}

// TestDoReportsLossWhateverFnReturns cuts every renewal, lets the client-side deadline pass,
// and checks Do's error matches ErrLeaseLost although the function returned a plain
// ctx.Err() (or nil) and the release afterwards succeeded.
func TestDoReportsLossWhateverFnReturns(t *testing.T) {
	for _, tt := range []struct {
		name   string
		result func(ctx context.Context) error
	}{
		{"ErrLostWhenFnReturnsCtxErr", func(ctx context.Context) error { return ctx.Err() }},
		{"ErrLostWhenFnReturnsNil", func(context.Context) error { return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cliClock := newFakeClock(base)
			p := newProxy(t, newServer(t))
			p.before = func(r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/renew") {
					panic(http.ErrAbortHandler)
				}
			}
			c := newClient(t, p.URL, client.WithClock(cliClock))
			err := client.Do(context.Background(), c, "job", client.AcquireOptions{TTL: 3 * time.Second},
				func(ctx context.Context, _ int64) error {
					eventually(t, 2*time.Second, "the keepalive to wait", func() bool { return cliClock.pending() >= 2 })
					cliClock.Advance(3 * time.Second) // past the deadline; the renewal it starts is cut
					<-ctx.Done()
					return tt.result(ctx)
				})
			if !errors.Is(err, client.ErrLeaseLost) {
				t.Errorf("Do = %v, want it to match ErrLeaseLost", err)
			}
			if got := p.succeeded("/v1/leases/job/release"); got != 1 {
				t.Errorf("releases answered 2xx = %d, want 1 (the server still held the lease)", got)
			}
		})
	}
}
