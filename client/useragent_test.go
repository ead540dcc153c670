package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/leasekeeper/leasekeeper/client"
)

func TestUserAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.Option
		want string
	}{
		{"Default", nil, "leasekeeper-client"},
		{"Set", []client.Option{client.WithUserAgent("billing-worker/1.4")}, "billing-worker/1.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.UserAgent()
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"type":"about:blank","title":"Not found","status":404,"code":"not_found"}`))
			}))
			defer srv.Close()
			c := newClient(t, srv.URL, tc.opts...)
			c.Get(context.Background(), "job")
			if ua := <-got; ua != tc.want {
				t.Errorf("User-Agent = %q, want %q", ua, tc.want)
			}
		})
	}
}
