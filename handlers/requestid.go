package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/leasekeeper/leasekeeper/lease"
)

// requestKey is the context key of a request's *reqInfo.
type requestKey struct{}

// reqInfo is what the middlewares learn about a request, for the handlers and for each other:
// withRequestID puts it in the request's context, the one value there, and the middlewares
// after it fill it in (the principal) or read it back (long). A context value and a copy of
// the request for each fact cost every request several allocations.
type reqInfo struct {
	id     string
	client client
	header http.Header // the response's
	// principal is the caller, set by authenticate; its zero value has no role.
	principal principalInfo
	// long is set by markLong, in the request's goroutine, and read by accessLog after it.
	long bool
	// resp is the response as accessLog passes it on.
	resp statusWriter
}

func infoOf(ctx context.Context) *reqInfo {
	info, _ := ctx.Value(requestKey{}).(*reqInfo)
	return info
}

// ensureInfo returns r's reqInfo, made by withRequestID, which runs before every middleware
// that fills it in; a request without one (a handler composed otherwise) gets an empty one
// rather than a nil dereference.
func ensureInfo(r *http.Request) (*reqInfo, *http.Request) {
	if info := infoOf(r.Context()); info != nil {
		return info, r
	}
	info := &reqInfo{}
	return info, r.WithContext(context.WithValue(r.Context(), requestKey{}, info))
}

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
		info := &reqInfo{id: id, header: w.Header(), client: client{addr: r.RemoteAddr, userAgent: lease.ClipHeader(r.UserAgent()), method: r.Method,
			path: r.URL.Path, ifNoneMatch: r.Header.Get("If-None-Match")}}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, info)))
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
	if info := infoOf(ctx); info != nil {
		return info.header
	}
	return nil
}

func requestID(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

// client is who sent the request (recorded with rejections) and what it asked for, with the
// If-None-Match of a conditional GET (not in the spec's parameters, so the strict server
// does not pass it on).
type client struct{ addr, userAgent, method, path, ifNoneMatch string }

func clientOf(ctx context.Context) client {
	if info := infoOf(ctx); info != nil {
		return info.client
	}
	return client{}
}

// markLong notes that the request of ctx lasts as long as its client or the waiting line
// makes it (a watch stream, an acquire that waits), so its duration goes to the histogram of
// long requests. Outside a request it does nothing.
func markLong(ctx context.Context) {
	if info := infoOf(ctx); info != nil {
		info.long = true
	}
}
