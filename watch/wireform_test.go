package watch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/watch"
	"github.com/leasekeeper/leasekeeper/wire"
)

// TestWireFormByDefault checks that a stream served with the hub's own encoder sends each
// event in its wire form (wire.Event: the spec's field names, times in milliseconds), the one
// the HTTP edge serves without an encoder of its own.
func TestWireFormByDefault(t *testing.T) {
	f := newFixture(t, watch.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := f.hub.Open(r.Context(), "", "")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.Serve(w, nil)
	}))
	t.Cleanup(srv.Close)
	c := open(t, srv.URL, "")
	f.acquire(t, "job")
	m := next(t, c)
	evs, err := f.st.Events(context.Background(), store.EventFilter{Name: "job", Limit: 1})
	if err != nil || len(evs.Items) != 1 {
		t.Fatalf("Events(job) = %v, %v", evs, err)
	}
	want, err := json.Marshal(wire.Event(evs.Items[0]))
	if err != nil {
		t.Fatal(err)
	}
	if m.data != string(want) {
		t.Errorf("watched event = %s, want its wire form %s", m.data, want)
	}
}
