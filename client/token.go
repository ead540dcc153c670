package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/fence"
)

// TokenInfo is the grant a fencing token was issued to. None of it changes once the token is
// issued.
type TokenInfo struct {
	Token int64
	// Name is the lease the token was granted on.
	Name string
	// Slot is the slot ("name#i") of a reader's or a semaphore's grant, the name its events
	// carry; empty for a plain lease.
	Slot string
	// Shared is true for a shared (read) lease's token: fenced writes refuse it.
	Shared     bool
	Holder     string
	AcquiredAt time.Time
}

// Token looks token up (GET /v1/tokens/{token}). A token the server knows no grant of (never
// issued, from a grant older than its history keeps, or on a name outside this client's key's
// prefixes) is an *APIError matching ErrNotFound.
func (c *Client) Token(ctx context.Context, token int64) (TokenInfo, error) {
	resp, err := c.api.GetTokenWithResponse(ctx, token)
	if err != nil {
		return TokenInfo{}, unanswered(ctx, fmt.Sprintf("token %d", token), err)
	}
	t := resp.JSON200
	if t == nil {
		return TokenInfo{}, fmt.Errorf("token %d: %w", token, problemOf(resp.HTTPResponse, resp.Body))
	}
	info := TokenInfo{Token: t.Token, Name: t.Name, Shared: t.Mode == "shared", Holder: t.Holder, AcquiredAt: t.AcquiredAt.Time}
	if t.Slot != nil {
		info.Slot = *t.Slot
	}
	return info, nil
}

var _ fence.Modes = (*Client)(nil)

// Shared reports whether token is a shared (read) lease's, implementing fence.Modes: the fence
// helpers (fence.WithModes, Table.Modes, Write.Modes) then refuse a reader's token as
// leasekeeper's own fenced writes do. A token the server knows no grant of is an error
// matching fence.ErrUnknownToken (and ErrNotFound). Each call asks the server: wrap the client
// in a fence.ModeCache (or use Modes), since a token's mode never changes.
func (c *Client) Shared(ctx context.Context, token int64) (bool, error) {
	info, err := c.Token(ctx, token)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, fmt.Errorf("%w: %w", fence.ErrUnknownToken, err)
		}
		return false, err
	}
	return info.Shared, nil
}

// Modes returns a fence.ModeCache over this client that remembers the mode of at most size
// tokens (fence.DefaultModeCacheSize when 0): pass it to fence.WithModes or as Table.Modes.
func (c *Client) Modes(size int) *fence.ModeCache {
	return fence.NewModeCache(c, size)
}
