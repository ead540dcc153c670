package handlers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"mime"
	"net/url"
	"strconv"
	"strings"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/metrics"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/wire"
)

// valueCSP is the policy of a stored value: sandboxed, no origin, nothing loads or runs.
const valueCSP = "sandbox; default-src 'none'"

func etag(r lease.Resource) string { return strconv.Quote(strconv.FormatInt(r.Version, 10)) }

// PutResource is a fenced write.
func (s *server) PutResource(ctx context.Context, req api.PutResourceRequestObject) (api.PutResourceResponseObject, error) {
	r, err := s.putResource(ctx, req)
	if err != nil {
		pr := s.toProblem(ctx, err)
		if pr.Code == api.ProblemCodeStaleToken || pr.Code == api.ProblemCodeTokenNotIssued || pr.Code == api.ProblemCodeSharedToken {
			s.metrics.Rejected(metrics.SourceResource)
		}
		return api.PutResourcedefaultApplicationProblemPlusJSONResponse{Body: pr.Problem, StatusCode: pr.Status}, nil
	}
	// A write that created the resource answers 201 with where it lives (RFC 9110 §9.3.4).
	a := wire.ResourceAnswer{Body: wire.Resource(r), ETag: etag(r)}
	if r.Version == 1 {
		a.Location = "/v1/resources/" + url.PathEscape(r.Name)
	}
	return a, nil
}

// writeCondition turns If-Match and If-None-Match into the store's condition. If-Match takes
// one strong ETag: one this server never made matches no version, so the write fails with
// precondition_failed as RFC 9110 §13.1.1 asks; or `*`, which every current version matches:
// the write applies only to a resource that exists. If-None-Match takes only `*`.
func writeCondition(p api.PutResourceParams) (ifVersion int64, ifAbsent bool, err error) {
	switch m := deref(p.IfMatch); {
	case m == "":
	case m == "*":
		ifVersion = lease.AnyVersion
	case strings.Contains(m, ","):
		return 0, false, lease.Errorf(lease.CodeInvalid, "If-Match takes one ETag of the resource, or *")
	default:
		ifVersion = math.MaxInt64
		if s, err := strconv.Unquote(m); err == nil {
			if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
				ifVersion = v
			}
		}
	}
	if m := deref(p.IfNoneMatch); m != "" {
		if m != "*" {
			return 0, false, lease.Errorf(lease.CodeInvalid, "If-None-Match on a write takes only *")
		}
		ifAbsent = true
	}
	return ifVersion, ifAbsent, nil
}

// matchesNone reports whether an If-None-Match list names tag, by weak comparison (RFC 9110
// §13.1.2).
func matchesNone(list, tag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

func (s *server) putResource(ctx context.Context, req api.PutResourceRequestObject) (lease.Resource, error) {
	if err := lease.ValidateName(req.Resource); err != nil {
		return lease.Resource{}, err
	}
	if req.Params.FencingToken == nil {
		return lease.Resource{}, lease.Errorf(lease.CodePrecondition, "a fenced write needs a Fencing-Token header")
	}
	token := *req.Params.FencingToken
	if err := lease.ValidatePresentedToken(token); err != nil {
		return lease.Resource{}, err
	}
	leaseName := deref(req.Params.LeaseName)
	if leaseName != "" {
		if err := lease.ValidateName(leaseName); err != nil {
			return lease.Resource{}, lease.Errorf(lease.CodeInvalid, "Lease-Name: %s", err.(*lease.Error).Message)
		}
	}
	ct := req.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	} else if _, _, err := mime.ParseMediaType(ct); err != nil {
		return lease.Resource{}, lease.Errorf(lease.CodeInvalid, "Content-Type %q: %v", ct, err)
	}
	// io.ReadAll, not io.Copy into a bytes.Buffer: that one grows to read a small value twice.
	var value []byte
	if req.Body != nil {
		var err error
		if value, err = io.ReadAll(req.Body); err != nil {
			return lease.Resource{}, fmt.Errorf("read value: %w", err)
		}
	}
	if len(value) > lease.MaxValueLen {
		return lease.Resource{}, lease.Errorf(lease.CodeTooLarge, "the value is larger than %d bytes", lease.MaxValueLen)
	}
	ifVersion, ifAbsent, err := writeCondition(req.Params)
	if err != nil {
		return lease.Resource{}, err
	}
	c, who := clientOf(ctx), principalOf(ctx)
	return s.store.PutResource(ctx, store.ResourceWrite{Name: req.Resource, Token: token, LeaseName: leaseName,
		Value: value, ContentType: ct, ClientAddr: c.addr, UserAgent: c.userAgent, Scope: who.Scope(),
		Owner: who.KeyID, Quota: s.auth.gate.Quota(who), IfVersion: ifVersion, IfAbsent: ifAbsent})
}

// GetResource returns a resource's value with its fence.
func (s *server) GetResource(ctx context.Context, req api.GetResourceRequestObject) (api.GetResourceResponseObject, error) {
	err := lease.ValidateName(req.Resource)
	var r lease.Resource
	if err == nil {
		r, err = s.store.GetResource(ctx, req.Resource)
	}
	if err != nil {
		return problemAs[api.GetResourcedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	// Caches may keep the value but must ask again each time; the ETag makes asking cheap.
	if h := responseHeader(ctx); h != nil {
		h.Set("Cache-Control", "no-cache")
	}
	if m := clientOf(ctx).ifNoneMatch; m != "" && matchesNone(m, etag(r)) {
		return api.GetResource304Response{Headers: api.GetResource304ResponseHeaders{ETag: etag(r)}}, nil
	}
	// The value is whatever a writer sent, with the type it claimed: served from this origin and
	// shown as a page, text/html could script the dashboard. Browsers save it instead, and a
	// sandbox with no origin and nothing allowed covers one that shows it anyway.
	return api.GetResource200AsteriskResponse{Body: bytes.NewReader(r.Value), ContentType: r.ContentType,
		ContentLength: int64(len(r.Value)), Headers: api.GetResource200ResponseHeaders{ETag: etag(r), FencingToken: r.Fence,
			ContentDisposition: `attachment; filename="` + r.Name + `"`, ContentSecurityPolicy: valueCSP, XContentTypeOptions: "nosniff"}}, nil
}

// ListResourceWriters lists a resource's newest accepted writes, newest first.
func (s *server) ListResourceWriters(ctx context.Context, req api.ListResourceWritersRequestObject) (api.ListResourceWritersResponseObject, error) {
	err := lease.ValidateName(req.Resource)
	var ws []lease.Write
	if err == nil {
		ws, err = s.store.ResourceWriters(ctx, req.Resource)
	}
	if err != nil {
		return problemAs[api.ListResourceWritersdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListResourceWriters200JSONResponse{Writers: make([]api.ResourceWrite, len(ws))}
	who := principalOf(ctx)
	for i, x := range ws {
		x.Lease, x.Holder = who.Attributed(x.Lease, x.Holder)
		out.Writers[i] = wire.Write(x)
	}
	return out, nil
}

// DeleteResource deletes a fenced resource and its fence.
func (s *server) DeleteResource(ctx context.Context, req api.DeleteResourceRequestObject) (api.DeleteResourceResponseObject, error) {
	err := lease.ValidateName(req.Resource)
	if err == nil {
		err = s.store.DeleteResource(ctx, req.Resource, principalOf(ctx).Actor())
	}
	if err != nil {
		return problemAs[api.DeleteResourcedefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.DeleteResource204Response{}, nil
}

// ListResources lists fenced resources.
func (s *server) ListResources(ctx context.Context, req api.ListResourcesRequestObject) (api.ListResourcesResponseObject, error) {
	prefix, keep, none := principalOf(ctx).ListScope(deref(req.Params.Prefix))
	if none {
		return api.ListResources200JSONResponse{Resources: []api.ResourceInfo{}}, nil
	}
	page, err := s.store.ListResources(ctx, store.ResourceFilter{Prefix: prefix, Limit: deref(req.Params.Limit), Cursor: deref(req.Params.Cursor)})
	if err != nil {
		return problemAs[api.ListResourcesdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListResources200JSONResponse{Resources: make([]api.ResourceInfo, 0, len(page.Items)), NextCursor: page.Next}
	who := principalOf(ctx)
	for _, r := range page.Items {
		if keep != nil && !keep(r.Name) {
			continue
		}
		r.Lease, r.Holder = who.Attributed(r.Lease, r.Holder)
		out.Resources = append(out.Resources, wire.Resource(r))
	}
	return out, nil
}

// ListRejections lists rejected stale writes, newest first.
func (s *server) ListRejections(ctx context.Context, req api.ListRejectionsRequestObject) (api.ListRejectionsResponseObject, error) {
	page, err := s.store.Rejections(ctx, store.RejectionFilter{Resource: deref(req.Params.Resource), Lease: deref(req.Params.Lease),
		Since: deref(req.Params.Since), Limit: deref(req.Params.Limit), Cursor: deref(req.Params.Cursor)})
	if err != nil {
		return problemAs[api.ListRejectionsdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListRejections200JSONResponse{Rejections: make([]api.Rejection, 0, len(page.Items)), NextCursor: page.Next}
	who := principalOf(ctx)
	for _, r := range page.Items {
		if !who.SeesRejection(r) {
			continue
		}
		out.Rejections = append(out.Rejections, wire.Rejection(r))
	}
	return out, nil
}

// ReportRejection records a rejection made by a resource outside leasekeeper.
func (s *server) ReportRejection(ctx context.Context, req api.ReportRejectionRequestObject) (api.ReportRejectionResponseObject, error) {
	r, err := s.reportRejection(ctx, req)
	if err != nil {
		return problemAs[api.ReportRejectiondefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	s.metrics.Rejected(metrics.SourceReported)
	return api.ReportRejection202JSONResponse(wire.Rejection(r)), nil
}

func (s *server) reportRejection(ctx context.Context, req api.ReportRejectionRequestObject) (lease.Rejection, error) {
	b := req.Body
	if b == nil {
		return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	if b.Resource == "" || len(b.Resource) > lease.MaxNameLen {
		return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "resource must be 1 to %d characters", lease.MaxNameLen)
	}
	if l := deref(b.Lease); l != "" {
		if err := lease.ValidateName(l); err != nil {
			return lease.Rejection{}, err
		}
	}
	if b.PresentedToken < 0 || b.CurrentFence < 0 {
		return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "a rejection needs 0 ≤ presented_token and 0 ≤ current_fence")
	}
	switch code := deref(b.Code); code {
	case "", api.RejectionReportCodeStaleToken:
		if b.PresentedToken >= b.CurrentFence {
			return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "a rejection needs 0 ≤ presented_token < current_fence")
		}
	case api.RejectionReportCodeSharedToken:
		// A reader's token is refused whatever the fence: what makes the report true is that
		// the token is one, on a name the key reaches (else as if it were none, invariant 8).
		gs, err := s.store.TokenGrants(ctx, []int64{b.PresentedToken})
		if err != nil {
			return lease.Rejection{}, err
		}
		g, ok := gs[b.PresentedToken]
		if name, _, _ := lease.SlotOf(g.Name); !ok || !g.Shared || !principalOf(ctx).InScope(name) {
			return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "token %d is no shared lease's token known within this key's reach", b.PresentedToken)
		}
	default:
		return lease.Rejection{}, lease.Errorf(lease.CodeInvalid, "code is stale_token or shared_token, not %q", code)
	}
	c := clientOf(ctx)
	return s.store.RecordRejection(ctx, lease.Rejection{Resource: b.Resource, Lease: deref(b.Lease), PresentedToken: b.PresentedToken,
		CurrentFence: b.CurrentFence, Reason: deref(b.Reason), ClientAddr: c.addr, UserAgent: c.userAgent, Source: lease.RejectionSourceExternal,
		KeyID: principalOf(ctx).KeyID}, principalOf(ctx).Scope())
}

// GetToken answers the grant a fencing token was issued to, with its mode, so that resources
// of the caller's own (the fence package) refuse a reader's token as PutResource does. A token
// whose grant the history no longer has, or one on a name outside the caller's scope, is
// not_found alike: a scoped key learns nothing of the names outside its scope (invariant 8).
func (s *server) GetToken(ctx context.Context, req api.GetTokenRequestObject) (api.GetTokenResponseObject, error) {
	var g store.TokenGrant
	var found bool
	var err error
	if req.Token < 0 || req.Token > lease.MaxToken {
		err = lease.Errorf(lease.CodeInvalid, "a fencing token is 0 to %d", lease.MaxToken)
	} else {
		var gs map[int64]store.TokenGrant
		gs, err = s.store.TokenGrants(ctx, []int64{req.Token})
		g, found = gs[req.Token]
	}
	name, _, slot := lease.SlotOf(g.Name)
	if err == nil && (!found || !principalOf(ctx).InScope(name)) {
		err = lease.Errorf(lease.CodeNotFound, "no grant of token %d is known within this key's reach", req.Token)
	}
	if err != nil {
		return problemAs[api.GetTokendefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.GetToken200JSONResponse{Token: req.Token, Name: name, Holder: g.Holder, Mode: api.TokenInfoModeExclusive,
		AcquiredAt: wire.Time(g.AcquiredAt)}
	if g.Shared {
		out.Mode = api.TokenInfoModeShared
	}
	if slot {
		out.Slot = &g.Name
	}
	return out, nil
}
