package handlers_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
)

// FuzzAcquireBody posts arbitrary bytes as the acquire body of arbitrary names: the answer is
// never a 5xx, a 4xx is always a problem+json with its status and a code, and a 200 is a lease
// whose token is the Fencing-Token header.
func FuzzAcquireBody(f *testing.F) {
	for _, seed := range []struct{ name, body string }{
		{"job", `{"holder":"w","ttl_ms":5000}`},
		{"job", `{"holder":"w","ttl_ms":5000,"metadata":{"a":[1,2]},"lock_delay_ms":10}`},
		{"job", `{"holder":"w","ttl_ms":"5000"}`},
		{"job", `{"holder":"w","ttl_ms":-288230376151701744}`},
		{"a/b", `{}`},
		{"", `null`},
		{"x", `{"holder":"\u0000","ttl_ms":1e400}`},
		{strings.Repeat("n", 201), `[`},
	} {
		f.Add(seed.name, []byte(seed.body))
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		req, err := http.NewRequest(http.MethodPost, "/v1/leases/"+url.PathEscape(name)+"/acquire", bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		switch {
		case w.Code >= 500:
			t.Fatalf("POST %q %q = %d %s, want no 5xx", name, body, w.Code, w.Body)
		case w.Code == http.StatusOK:
			var l api.Lease
			if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || w.Header().Get("Fencing-Token") != strconv.FormatInt(l.Token, 10) {
				t.Fatalf("POST %q %q = 200 %s (Fencing-Token %q), %v", name, body, w.Body, w.Header().Get("Fencing-Token"), err)
			}
		case w.Code >= 400:
			var p api.Problem
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("POST %q %q = %d with Content-Type %q, want application/problem+json", name, body, w.Code, ct)
			}
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code || p.Code == "" {
				t.Fatalf("POST %q %q = %d %s, %v; want a problem with that status and a code", name, body, w.Code, w.Body, err)
			}
		default:
			t.Fatalf("POST %q %q = %d, want 200 or a 4xx", name, body, w.Code)
		}
	})
}
