package handlers

import (
	"net/http"
	"testing"
)

func TestJSONMediaType(t *testing.T) {
	for ct, want := range map[string]bool{"": true, "application/json": true, "application/json;charset=utf-8": true, "APPLICATION/JSON; Charset=\"UTF-8\"": true,
		"application/json; charset=utf-16": false, "text/plain": false, "application/json, text/plain": false, ";": false} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if got := jsonMediaType(h); got != want {
			t.Errorf("jsonMediaType(%q) = %v, want %v", ct, got, want)
		}
	}
	if jsonMediaType(http.Header{"Content-Type": {"application/json", "application/json"}}) {
		t.Error("jsonMediaType(two Content-Type fields) = true, want false")
	}
}
