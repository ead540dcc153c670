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
}

// DefaultReportTimeout bounds a Report when Reporter.Timeout is zero.
const DefaultReportTimeout = 2 * time.Second

// Reporter sends rejections to a leasekeeper server, which records them and
// shows them on its dashboard. The zero value is not usable: BaseURL is
// required.
type Reporter struct {
	// BaseURL is the server, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Timeout bounds each Report; zero means DefaultReportTimeout.
	Timeout time.Duration
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

// DefaultMaxInFlight bounds the reports an Async callback runs at once when
// its max is zero.
const DefaultMaxInFlight = 16

// Async returns a callback for WithOnReject, Table.OnReject or Write.OnReject
// that reports each rejection in its own goroutine and returns at once, so a
// slow or absent leasekeeper server never delays the refused request. The
// report is detached from the request's cancellation but bounded by
// r.Timeout. At most maxInFlight reports run at once (DefaultMaxInFlight when
// zero); beyond that a rejection is dropped. Failures and drops are passed to
// onErr, which may be nil and must be safe for concurrent use.
func (r *Reporter) Async(maxInFlight int, onErr func(Rejection, error)) func(context.Context, Rejection) {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	sem := make(chan struct{}, maxInFlight)
	return func(ctx context.Context, rej Rejection) {
		select {
		case sem <- struct{}{}:
		default:
			if onErr != nil {
				onErr(rej, fmt.Errorf("report rejection of %q: dropped, %d reports already in flight", rej.Resource, maxInFlight))
			}
			return
		}
		ctx = context.WithoutCancel(ctx)
		go func() {
			defer func() { <-sem }()
			if err := r.Report(ctx, rej); err != nil && onErr != nil {
				onErr(rej, err)
			}
		}()
	}
}
