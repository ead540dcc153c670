package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// TestMetadataKeptAsWritten: metadata is stored as the client wrote it, without JSON's HTML
// escapes (\u003c for <), which the dashboard would otherwise show literally.
func TestMetadataKeptAsWritten(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(http.MethodPost, "/v1/leases/job/acquire", strings.NewReader(`{"holder":"w","ttl_ms":5000,"metadata":{"q":"a<b && c>d"}}`), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire = %d %s", resp.StatusCode, body)
	}
	st, err := e.store.Get(e.ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(st.Metadata), `{"q":"a<b && c>d"}`; got != want {
		t.Errorf("stored metadata = %s, want %s", got, want)
	}
}

// TestRejectionWithoutLeaseIsAnEvent: a refused write whose token belongs to no known grant and
// that names no lease still reaches the event stream (with an empty name), so live views of
// rejections see it.
func TestRejectionWithoutLeaseIsAnEvent(t *testing.T) {
	e := newEnv(t)
	l := e.acquire("issuer", "w1", time.Minute) // a token at least as high as those written below
	for _, tok := range []string{strconv.FormatInt(l.Token, 10), "5"} {
		e.do(http.MethodPut, "/v1/resources/r", strings.NewReader("v"), map[string]string{"Fencing-Token": tok})
	}
	page, err := e.store.Events(e.ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var rejected []lease.Event
	for _, ev := range page.Items {
		if ev.Type == lease.EventRejected {
			rejected = append(rejected, ev)
		}
	}
	if len(rejected) != 1 || rejected[0].Name != "" || rejected[0].Resource != "r" || rejected[0].Token != 5 {
		t.Errorf("rejected events = %+v, want one, of resource r with token 5 and no lease", rejected)
	}
}
