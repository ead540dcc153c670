package handlers

import (
	"context"
	"net/url"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/wire"
)

// CreateKey creates an API key and shows its secret once.
func (s *server) CreateKey(ctx context.Context, req api.CreateKeyRequestObject) (api.CreateKeyResponseObject, error) {
	out, err := s.createKey(ctx, req)
	if err != nil {
		return problemAs[api.CreateKeydefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return out, nil
}

func (s *server) createKey(ctx context.Context, req api.CreateKeyRequestObject) (api.CreateKey201JSONResponse, error) {
	if req.Body == nil {
		return api.CreateKey201JSONResponse{}, lease.Errorf(lease.CodeInvalid, "the body is required")
	}
	var prefixes []string
	if req.Body.Prefixes != nil {
		prefixes = append(prefixes, *req.Body.Prefixes...)
	}
	secret, k, err := s.newKey(ctx, req.Body.Label, auth.Role(req.Body.Role), prefixes)
	if err != nil {
		return api.CreateKey201JSONResponse{}, err
	}
	return api.CreateKey201JSONResponse{Body: api.CreatedKey{Key: secret, Record: wireKey(k)},
		Headers: api.CreateKey201ResponseHeaders{Location: "/v1/keys/" + url.PathEscape(k.ID)}}, nil
}

// newKey creates a key for the caller (the API's and the dashboard's create) and returns its
// secret, the only time anyone sees it. Codes: invalid_request.
func (s *server) newKey(ctx context.Context, label string, role auth.Role, prefixes []string) (string, auth.Key, error) {
	k := auth.Key{ID: auth.NewKeyID(), Label: label, Role: role, Prefixes: prefixes, CreatedBy: principalOf(ctx).Actor()}
	if err := auth.ValidateKey(k.Label, k.Role, k.Prefixes); err != nil {
		return "", auth.Key{}, err
	}
	if k.Role == auth.Admin && len(k.Prefixes) > 0 {
		return "", auth.Key{}, lease.Errorf(lease.CodeInvalid, "an admin key reaches every name: prefixes apply to reader and writer keys only")
	}
	secret := auth.NewSecret()
	if _, err := s.store.CreateKey(ctx, k, auth.Hash(secret), false); err != nil {
		return "", auth.Key{}, err
	}
	k.CreatedAt = s.clock.Now()
	s.log.InfoContext(ctx, "API key created", "key_id", k.ID, "label", k.Label, "role", k.Role, "by", k.CreatedBy)
	return secret, k, nil
}

// ListKeys lists every key, never a secret.
func (s *server) ListKeys(ctx context.Context, _ api.ListKeysRequestObject) (api.ListKeysResponseObject, error) {
	keys, err := s.store.Keys(ctx)
	if err != nil {
		return problemAs[api.ListKeysdefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	out := api.ListKeys200JSONResponse{Keys: make([]api.Key, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, wireKey(k))
	}
	return out, nil
}

// RevokeKey revokes a key: it stops working at once, and its streams and sessions end.
func (s *server) RevokeKey(ctx context.Context, req api.RevokeKeyRequestObject) (api.RevokeKeyResponseObject, error) {
	if err := s.revokeKey(ctx, req.Id); err != nil {
		return problemAs[api.RevokeKeydefaultApplicationProblemPlusJSONResponse](s, ctx, err), nil
	}
	return api.RevokeKey204Response{}, nil
}

func (s *server) revokeKey(ctx context.Context, id string) error {
	who := principalOf(ctx).Actor()
	k, err := s.store.RevokeKey(ctx, id, who)
	if err != nil {
		return err
	}
	s.auth.ended(id)
	s.log.InfoContext(ctx, "API key revoked", "key_id", id, "label", k.Label, "by", who)
	return nil
}

func wireKey(k auth.Key) api.Key {
	out := api.Key{Id: k.ID, Label: k.Label, Role: api.Role(k.Role), Prefixes: k.Prefixes, CreatedAt: wire.Time(k.CreatedAt),
		RevokedAt: wire.OptTime(k.RevokedAt)}
	if out.Prefixes == nil {
		out.Prefixes = []string{}
	}
	if k.CreatedBy != "" {
		out.CreatedBy = ptr(k.CreatedBy)
	}
	if k.RevokedBy != "" {
		out.RevokedBy = ptr(k.RevokedBy)
	}
	return out
}
