package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
)

// TestCampaignReadsMetadataUnderLock runs a Proclaim while a campaign of the same Election
// asks again for the name, with nothing but the Election itself between the two goroutines:
// under -race, a campaign that read the metadata without the lock Proclaim writes it under is
// a reported data race. The server is a stub that answers in-process, so that no shared
// connection pool orders the two goroutines by accident.
func TestCampaignReadsMetadataUnderLock(t *testing.T) {
	arrived, gate := make(chan struct{}), make(chan struct{})
	grants := 0
	stub := roundTripper(func(r *http.Request) (*http.Response, error) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/acquire") && grants == 0: // only the first campaign's goroutine gets here
			grants++
			return answer(r, http.StatusOK, "application/json", leaseJSON(1))
		case strings.HasSuffix(r.URL.Path, "/acquire"):
			select {
			case arrived <- struct{}{}:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			select {
			case <-gate:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			return answer(r, http.StatusServiceUnavailable, "application/problem+json", `{"status":503,"code":"unavailable"}`)
		case strings.HasSuffix(r.URL.Path, "/renew"):
			return answer(r, http.StatusOK, "application/json", leaseJSON(1))
		case strings.HasSuffix(r.URL.Path, "/release"):
			return answer(r, http.StatusNoContent, "", "")
		}
		return answer(r, http.StatusForbidden, "application/problem+json", `{"status":403,"code":"forbidden"}`)
	})
	c, err := client.New("http://stub.invalid", client.WithHTTPClient(&http.Client{Transport: stub}),
		client.WithClock(instantClock{}), client.WithAcquireAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := c.NewElection("leader", client.ElectionOptions{Candidate: "node-1", TTL: time.Hour, Metadata: map[string]any{"v": 0}})
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign = %v", err)
	}
	// The term ends on this side only: the next Campaign asks again, and Proclaim still
	// renews it on the (stub) server.
	if err := term.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Campaign(ctx)
		done <- err
	}()
	testwait.Receive(t, arrived, 10*time.Second)
	gate <- struct{}{} // the attempt fails: the campaign pauses (no time at all) and asks again
	if err := e.Proclaim(ctx, map[string]any{"v": 1}); err != nil {
		t.Fatalf("Proclaim = %v", err)
	}
	testwait.Receive(t, arrived, 10*time.Second) // the next attempt has read the metadata
	cancel()
	if err := testwait.Receive(t, done, 10*time.Second); err == nil {
		t.Error("Campaign = nil after its context ended, want an error")
	}
}

// roundTripper answers requests with a function, in the caller's goroutine.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return f(r)
}

// answer is an HTTP answer to r.
func answer(r *http.Request, status int, contentType, body string) (*http.Response, error) {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// leaseJSON is a grant of an hour on "leader" with token.
func leaseJSON(token int64) string {
	at := time.Now().UTC().Truncate(time.Millisecond)
	return fmt.Sprintf(`{"name":"leader","holder":"node-1","lease_id":"lk_stub","token":%d,"ttl_ms":3600000,"lock_delay_ms":0,`+
		`"acquired_at":%q,"renewed_at":%q,"expires_at":%q}`, token, at.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano),
		at.Add(time.Hour).Format(time.RFC3339Nano))
}

// instantClock is a client.Clock whose timers of under a minute fire at once and whose
// longer ones never do: a campaign's pauses take no time, while an hour-long lease is never
// renewed and never reaches its deadline.
type instantClock struct{}

func (instantClock) Now() time.Time { return time.Now() }

func (instantClock) AfterFunc(d time.Duration, f func()) client.Timer {
	if d < time.Minute {
		go f()
	}
	return noTimer{}
}

type noTimer struct{}

func (noTimer) Stop() bool { return false }
