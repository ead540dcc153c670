package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/leasekeeper/leasekeeper/client/internal/wire"
)

// ResourceInfo describes a fenced resource after a write.
type ResourceInfo struct {
	Resource string
	// Fence is the highest token the resource has accepted.
	Fence       int64
	Version     int64
	UpdatedAt   time.Time
	Size        int64
	ContentType string
}

// PutOptions are the optional parts of a fenced write.
type PutOptions struct {
	// Lease, when set, names the lease whose current unexpired token the write's token must
	// be (the Lease-Name header): a write by a holder that lost the lease is refused even
	// when no newer holder has written yet.
	Lease string
	// ContentType is the value's media type; empty means application/octet-stream.
	ContentType string
}

// PutResource writes value to a fenced resource kept by leasekeeper, carrying token (the
// Token of the lease the write is made under). A refused write is a *StaleTokenError
// (errors.Is ErrStaleToken), recorded by the server.
//
// The server makes the check, not the client: PutResource sends the write whatever the state
// of any lease context, which is the point of fencing.
func (c *Client) PutResource(ctx context.Context, resource string, token int64, value []byte, o PutOptions) (ResourceInfo, error) {
	p := &wire.PutResourceParams{FencingToken: &token}
	if o.Lease != "" {
		p.LeaseName = &o.Lease
	}
	contentType := o.ContentType
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	resp, err := c.api.PutResourceWithBodyWithResponse(ctx, resource, p, contentType, bytes.NewReader(value))
	if err != nil {
		return ResourceInfo{}, unanswered(ctx, fmt.Sprintf("put resource %q", resource), err)
	}
	r := resp.JSON200
	if r == nil {
		r = resp.JSON201 // the write created the resource
	}
	if r != nil {
		return ResourceInfo{Resource: r.Resource, Fence: r.Fence, Version: r.Version, UpdatedAt: r.UpdatedAt.Time,
			Size: r.Size, ContentType: r.ContentType}, nil
	}
	if pr := resp.ApplicationproblemJSON409; resp.StatusCode() == http.StatusConflict && pr != nil && pr.Code == wire.ProblemCodeStaleToken {
		return ResourceInfo{}, &StaleTokenError{Resource: resource, Lease: o.Lease, PresentedToken: deref(pr.PresentedToken),
			CurrentFence: deref(pr.CurrentFence), Detail: deref(pr.Detail)}
	}
	return ResourceInfo{}, fmt.Errorf("put resource %q: %w", resource, problemOf(resp.HTTPResponse, resp.Body))
}
