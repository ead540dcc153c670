package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/api"
)

// TestJSONContentType checks that a JSON endpoint takes only a body labelled JSON (or not
// labelled), and refuses the rest with 415 before doing anything.
func TestJSONContentType(t *testing.T) {
	e := newEnv(t)
	key := `{"label":"ct","role":"reader"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "image/png",
		"application/jsonx", "application/json; charset=latin1", "text/json", "application/problem+json", "not a media type"} {
		before := e.snapshot()
		resp, body := e.do("POST", "/v1/keys", strings.NewReader(key), map[string]string{"Content-Type": ct})
		wantProblem(t, "POST /v1/keys as "+ct, resp, body, http.StatusUnsupportedMediaType, api.ProblemCodeUnsupportedMediaType)
		resp, body = e.do("POST", "/v1/leases/ct/acquire", strings.NewReader(`{"holder":"w","ttl_ms":60000}`), map[string]string{"Content-Type": ct})
		wantProblem(t, "acquire as "+ct, resp, body, http.StatusUnsupportedMediaType, api.ProblemCodeUnsupportedMediaType)
		if diff := cmp.Diff(before, e.snapshot()); diff != "" {
			t.Errorf("a body as %s changed the data (-before +after):\n%s", ct, diff)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", ""} {
		h := map[string]string{}
		if ct != "" {
			h["Content-Type"] = ct
		}
		if resp, body := e.do("POST", "/v1/keys", strings.NewReader(key), h); resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Errorf("POST /v1/keys as %q = %d %s, want it created", ct, resp.StatusCode, body)
		}
	}
}

// TestStrictJSON checks that what encoding/json would silently change is refused: bytes that
// are not UTF-8, escapes of lone surrogates, members given twice; and holders that would look
// like another.
func TestStrictJSON(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ name, body string }{
		{"InvalidUTF8Holder", "{\"holder\":\"w\xff\",\"ttl_ms\":60000}"},
		{"InvalidUTF8Metadata", "{\"holder\":\"w\",\"ttl_ms\":60000,\"metadata\":{\"k\":\"\xc3\"}}"},
		{"LoneHighSurrogate", `{"holder":"w\ud800","ttl_ms":60000}`},
		{"LoneLowSurrogate", `{"holder":"w\udc00x","ttl_ms":60000}`},
		{"HighThenNotLow", `{"holder":"w\ud800\u0041","ttl_ms":60000}`},
		{"SurrogateInMetadataName", `{"holder":"w","ttl_ms":60000,"metadata":{"\udfff":1}}`},
		{"DuplicateMember", `{"holder":"w","holder":"x","ttl_ms":60000}`},
		{"DuplicateSpelledTwoWays", `{"holder":"w","ho\u006cder":"x","ttl_ms":60000}`},
		{"DuplicateInMetadata", `{"holder":"w","ttl_ms":60000,"metadata":{"a":{"b":1,"b":2}}}`},
		{"DuplicateInArray", `{"holder":"w","ttl_ms":60000,"metadata":{"a":[{"b":1,"b":2}]}}`},
		{"ZeroWidthHolder", `{"holder":"alice\u200b","ttl_ms":60000}`},
		{"BidiOverrideHolder", "{\"holder\":\"\u202etsoh-live\",\"ttl_ms\":60000}"},
		{"NotJSONWithAStrayBrace", `["a":1,"a":1}D`}, // once scanned for ever
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.do("POST", "/v1/leases/strict/acquire", strings.NewReader(c.body), map[string]string{"Content-Type": "application/json"})
			wantProblem(t, "acquire "+c.body, resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
		})
	}
	for _, c := range []struct{ name, body string }{
		{"SurrogatePair", `{"holder":"w\ud83d\ude00","ttl_ms":60000}`},
		{"SameNameInTwoObjects", `{"holder":"w","ttl_ms":60000,"metadata":{"a":{"k":1},"b":{"k":2}}}`},
		{"NonLatinHolder", `{"holder":"工作者@ホスト","ttl_ms":60000}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := e.do("POST", "/v1/leases/ok-"+strings.ToLower(c.name)+"/acquire", strings.NewReader(c.body), map[string]string{"Content-Type": "application/json"})
			if resp.StatusCode != http.StatusOK {
				t.Errorf("acquire %s = %d %s, want 200", c.body, resp.StatusCode, body)
			}
		})
	}
	if got := e.state("ok-surrogatepair").Holder; got != "w😀" {
		t.Errorf("holder from a surrogate pair = %q, want w😀", got)
	}
}

// TestHeaderTooLarge checks that header fields past the handler's bound are answered 431
// problem+json, not Go's text/plain.
func TestHeaderTooLarge(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("GET", "/v1/leases", nil, map[string]string{"X-Filler": strings.Repeat("a", 70<<10)})
	wantProblem(t, "GET with 70 KiB of header", resp, body, http.StatusRequestHeaderFieldsTooLarge, api.ProblemCodeHeaderTooLarge)
	if resp, body := e.do("GET", "/v1/leases", nil, map[string]string{"X-Filler": strings.Repeat("a", 60<<10)}); resp.StatusCode != http.StatusOK {
		t.Errorf("GET with 60 KiB of header = %d %s, want 200", resp.StatusCode, body)
	}
}

// TestQueryNotUTF8: a query string that is not UTF-8 once decoded is 400 invalid_request on
// every route, the dashboard's too, before any handler reads it (PostgreSQL refuses such text
// in a statement: it was a 500 there); the same query in UTF-8 passes.
func TestQueryNotUTF8(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/v1/leases?prefix=%A9", "/v1/resources?prefix=a%FFb", "/v1/leases?%C3=x", "/?q=%A9", "/?holder=%A9", "/healthz?x=%A9"} {
		resp, body := e.do("GET", path, nil, nil)
		wantProblem(t, "GET "+path, resp, body, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	}
	for _, path := range []string{"/v1/leases?prefix=%C3%A9", "/healthz?x=%C3%A9"} {
		if resp, body := e.do("GET", path, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, resp.StatusCode, body)
		}
	}
}
