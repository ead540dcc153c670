package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyClient
	keyHeader
	keyLong
)

// withRequestID takes a sane X-Request-Id from the client or makes one, echoes it, and puts it
// in the context for logs and problems, with the client and the response's header.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			var b [8]byte
			rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), keyRequestID, id)
		ctx = context.WithValue(ctx, keyClient, client{addr: r.RemoteAddr, userAgent: r.UserAgent(), method: r.Method, path: r.URL.Path,
			ifNoneMatch: r.Header.Get("If-None-Match")})
		ctx = context.WithValue(ctx, keyHeader, w.Header())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// responseHeader is the header of the response to the request of ctx, for answers built far
// from the ResponseWriter (the strict server's typed responses), nil outside a request.
func responseHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(keyHeader).(http.Header)
	return h
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

// client is who sent the request (recorded with rejections) and what it asked for, with the
// If-None-Match of a conditional GET (not in the spec's parameters, so the strict server
// does not pass it on).
type client struct{ addr, userAgent, method, path, ifNoneMatch string }

func clientOf(ctx context.Context) client {
	c, _ := ctx.Value(keyClient).(client)
	return c
}

// markLong notes that the request of ctx lasts as long as its client or the waiting line
// makes it (a watch stream, an acquire that waits), so its duration goes to the histogram of
// long requests. Outside a request it does nothing.
func markLong(ctx context.Context) {
	if p, ok := ctx.Value(keyLong).(*bool); ok {
		*p = true
	}
}
