package fence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Rejection is a write refused because its token was stale, in the form
// leasekeeper's POST /v1/rejections takes.
type Rejection struct {
	// Resource is what was written: a row key, a URL path.
	Resource string `json:"resource"`
	// Lease is the lease name the token came from, when known.
	Lease string `json:"lease,omitempty"`
	// PresentedToken is the stale token.
	PresentedToken int64 `json:"presented_token"`
	// CurrentFence is the fence that refused it.
	CurrentFence int64 `json:"current_fence"`
	// Reason is free text for humans.
	Reason string `json:"reason,omitempty"`
	// Code is why the write was refused: "" (stale_token) for a token below the fence,
	// CodeSharedToken for a reader's token, which may be above the fence.
	Code string `json:"code,omitempty"`
}

// DefaultReportTimeout bounds a Report when Reporter.Timeout is zero.
const DefaultReportTimeout = 2 * time.Second

// DefaultUserAgent is the User-Agent of a Reporter that sets none.
const DefaultUserAgent = "leasekeeper-fence"

// Reporter sends rejections to a leasekeeper server, which records them and
// shows them on its dashboard. The zero value is not usable: BaseURL is
// required. A program that uses the Go client gets one configured like its
// client (URL, HTTP client, User-Agent, API key) from the client's Reporter
// method.
type Reporter struct {
	// BaseURL is the server, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Timeout bounds each Report; zero means DefaultReportTimeout.
	Timeout time.Duration
	// UserAgent is sent with every report and recorded with the rejection,
	// so the dashboard tells which program wrote late; empty means
	// DefaultUserAgent.
	UserAgent string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>"; the
	// server needs a writer key whose prefixes cover the resource.
	APIKey string
}

// Report posts rej to {BaseURL}/v1/rejections and returns nil when the server
// answers 202 Accepted. It gives up after r.Timeout.
func (r *Reporter) Report(ctx context.Context, rej Rejection) error {
	if rej.Resource == "" {
		return errors.New("report rejection: empty resource")
	}
	if r.BaseURL == "" {
		return fmt.Errorf("report rejection of %q: Reporter has no BaseURL", rej.Resource)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultReportTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	body, err := json.Marshal(rej)
	if err != nil {
		return fmt.Errorf("report rejection of %q: %w", rej.Resource, err)
	}
	url := strings.TrimRight(r.BaseURL, "/") + "/v1/rejections"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("report rejection of %q: %w", rej.Resource, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	ua := r.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("User-Agent", ua)
	if r.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.APIKey)
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("report rejection of %q: %w", rej.Resource, err)
	}
	defer resp.Body.Close()
	// A short read lets the connection be reused and gives a problem detail.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("report rejection of %q: %s: %s", rej.Resource, resp.Status, problemDetail(msg))
	}
	return nil
}

// problemDetail returns the detail (or title) of a problem+json body, or the
// body itself, shortened.
func problemDetail(body []byte) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}
	if json.Unmarshal(body, &p) == nil && (p.Detail != "" || p.Title != "") {
		s := p.Detail
		if s == "" {
			s = p.Title
		}
		if p.Code != "" {
			s = p.Code + ": " + s
		}
		return s
	}
	return truncate(strings.TrimSpace(string(body)))
}

// DefaultMaxInFlight bounds the reports an Async runs at once when its max is
// zero.
const DefaultMaxInFlight = 16

// Async reports rejections in the background, so that a slow or absent
// leasekeeper server never delays the refused write. Make one with
// Reporter.Async and pass its Report method as the callback of WithOnReject,
// Table.OnReject or Write.OnReject; call Flush before the program exits.
type Async struct {
	r     *Reporter
	sem   chan struct{}
	onErr func(Rejection, error)

	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed when inFlight drops to zero
}

// Async returns an Async that runs each report in its own goroutine,
// detached from the refused request's cancellation but bounded by r.Timeout.
// At most maxInFlight reports run at once (DefaultMaxInFlight when zero);
// beyond that a rejection is dropped. Failures and drops are passed to onErr,
// which may be nil and must be safe for concurrent use.
func (r *Reporter) Async(maxInFlight int, onErr func(Rejection, error)) *Async {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	return &Async{r: r, sem: make(chan struct{}, maxInFlight), onErr: onErr}
}

// Report starts reporting rej and returns at once.
func (a *Async) Report(ctx context.Context, rej Rejection) {
	select {
	case a.sem <- struct{}{}:
	default:
		if a.onErr != nil {
			a.onErr(rej, fmt.Errorf("report rejection of %q: dropped, %d reports already in flight", rej.Resource, cap(a.sem)))
		}
		return
	}
	ctx = context.WithoutCancel(ctx)
	a.mu.Lock()
	if a.inFlight == 0 {
		a.idle = make(chan struct{})
	}
	a.inFlight++
	a.mu.Unlock()
	go func() {
		defer a.done()
		defer func() { <-a.sem }()
		if err := a.r.Report(ctx, rej); err != nil && a.onErr != nil {
			a.onErr(rej, err)
		}
	}()
}

// done counts one report finished.
func (a *Async) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight--
	if a.inFlight == 0 {
		close(a.idle)
	}
}

// Flush waits until no report is in flight (each is bounded by the
// Reporter's Timeout), or until ctx ends, and returns ctx's error then.
func (a *Async) Flush(ctx context.Context) error {
	a.mu.Lock()
	if a.inFlight == 0 {
		a.mu.Unlock()
		return nil
	}
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
