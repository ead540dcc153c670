package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
)

// Option configures a Client.
type Option func(*Client) error

// WithUserAgent sets the User-Agent of every request, e.g. "billing-worker/1.4". The server
// records it with rejected stale writes, so a good one tells you who wrote late.
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		if ua == "" {
			return errors.New("WithUserAgent: empty")
		}
		c.userAgent = ua
		return nil
	}
}

// WithAPIKey sends key as "Authorization: Bearer <key>" with every request: lease
// operations, reads, watch streams, and the reports of the Reporter built from the client.
// The client never reads a key from the environment by itself; the leasekeeper command
// reads LEASEKEEPER_API_KEY and passes it here. Over plain http the key crosses the network
// in clear: use https beyond loopback.
func WithAPIKey(key string) Option {
	return func(c *Client) error {
		if key == "" {
			return errors.New("WithAPIKey: empty key")
		}
		if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return errors.New("WithAPIKey: the key has spaces or control characters")
		}
		c.apiKey = key
		return nil
	}
}

// WithHTTPClient sets the HTTP client (timeouts, transport, proxies). The default is an
// http.Client without an overall timeout: requests are bounded by their contexts. A Timeout
// set here also cuts watch streams, which then reconnect.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("WithHTTPClient: nil client")
		}
		c.httpClient = hc
		return nil
	}
}

// WithTLSConfig sets the TLS configuration of https connections (a private CA, client
// certificates, a server name). It applies to a copy of the HTTP client's transport, which
// must then be an *http.Transport (the default is).
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) error {
		if cfg == nil {
			return errors.New("WithTLSConfig: nil config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	}
}

// WithCAFile trusts the PEM certificates in path (and only them) for https connections to
// the server: a private CA, or the server's self-signed certificate. It combines with
// WithTLSConfig, replacing its RootCAs.
func WithCAFile(path string) Option {
	return func(c *Client) error {
		pem, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("WithCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("WithCAFile: no PEM certificate in %s", path)
		}
		c.rootCAs = pool
		return nil
	}
}

// WithClock sets the clock that measures lease deadlines and paces renewals (tests).
func WithClock(clk Clock) Option {
	return func(c *Client) error {
		if clk == nil {
			return errors.New("WithClock: nil clock")
		}
		c.clock = clk
		return nil
	}
}

// WithLogger sets the logger for renewal failures and retries; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.log = l
		return nil
	}
}

// WithRenewFraction sets when a lease is renewed, as a fraction of its ttl after the last
// successful renewal was sent (default 1/3, leaving two more tries before the deadline).
func WithRenewFraction(f float64) Option {
	return func(c *Client) error {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("WithRenewFraction: %v is not in (0, 1)", f)
		}
		c.renewFraction = f
		return nil
	}
}

// WithSafetyMargin sets how long before the earliest possible server-side expiry a lease
// context ends (default a tenth of the ttl). It absorbs the difference in rate between the
// client's and the server's clocks and the time work takes to notice that its context ended.
// Acquire refuses a ttl that is not longer than the margin.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("WithSafetyMargin: %v is not positive", d)
		}
		c.margin = d
		return nil
	}
}

// WithAcquireAttempts sets how many times an acquire is sent when the network or the server
// fails (default 4). Every attempt carries the same Idempotency-Key.
func WithAcquireAttempts(n int) Option {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("WithAcquireAttempts: %d is below 1", n)
		}
		c.attempts = n
		return nil
	}
}

// applyTLS gives the HTTP client a copy of its transport with the TLS settings of
// WithTLSConfig and WithCAFile, leaving the caller's client and transport untouched.
func (c *Client) applyTLS() error {
	if c.tlsConfig == nil && c.rootCAs == nil {
		return nil
	}
	cfg := c.tlsConfig
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.rootCAs != nil {
		cfg.RootCAs = c.rootCAs
	}
	base := c.httpClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return fmt.Errorf("TLS options need an *http.Transport, and the HTTP client has a %T", base)
	}
	t = t.Clone()
	t.TLSClientConfig = cfg
	hc := *c.httpClient
	hc.Transport = t
	c.httpClient, c.ownTransport = &hc, t
	return nil
}
