package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasekeeper/leasekeeper/internal/promcheck"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// liveService is the whole service as `leasekeeper serve` assembles it (waiting line, watch
// hub, metrics on one registry), on a fake clock, served on a local port.
type liveService struct {
	t     *testing.T
	url   string
	hc    *http.Client // sends an admin key
	clock *lease.FakeClock
	store *sqlite.Store
	svc   *service.Service
}

func newLiveService(t *testing.T) *liveService {
	t.Helper()
	clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	srv, st, svc := servicetest.StartService(t, service.Config{Retention: store.Retention{Age: time.Hour}, Version: "test"},
		sqlite.Options{Clock: clock})
	return &liveService{t: t, url: srv.URL, hc: srv.Client(), clock: clock, store: st, svc: svc}
}

// post sends a JSON body and returns the status and the decoded answer.
func (s *liveService) post(ctx context.Context, path, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// scrapeText reads /metrics as Prometheus would.
func (s *liveService) scrapeText() []byte {
	s.t.Helper()
	resp, err := s.hc.Get(s.url + "/metrics")
	if err != nil {
		s.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /metrics = %d, %v", resp.StatusCode, err)
	}
	return b
}

// scrape reads /metrics and parses it.
func (s *liveService) scrape() scraped {
	s.t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(s.scrapeText()))
	if err != nil {
		s.t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

type scraped map[string]*dto.MetricFamily

// find returns the series of name whose labels include labels, or nil.
func (m scraped) find(name string, labels map[string]string) *dto.Metric {
	mf := m[name]
	if mf == nil {
		return nil
	}
series:
	for _, s := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		return s
	}
	return nil
}

// count is a histogram's sample count (0 when the series is absent).
func (m scraped) count(name string, labels map[string]string) uint64 {
	return m.find(name, labels).GetHistogram().GetSampleCount()
}

func (m scraped) counter(name string, labels map[string]string) float64 {
	return m.find(name, labels).GetCounter().GetValue()
}

// TestMetricsScrape drives waiting acquires, a watch stream and stale writes through a live
// server and checks, on its /metrics, that the series about them move: the acquire wait
// histogram by outcome, long requests apart from the others, the watchers' delivery delay,
// and stale writes by source. Then promtool lints the scrape, every series present.
func TestMetricsScrape(t *testing.T) {
	s := newLiveService(t)
	ctx := context.Background()
	const (
		wait      = "leasekeeper_acquire_wait_seconds"
		short     = "leasekeeper_http_request_duration_seconds"
		long      = "leasekeeper_http_long_request_duration_seconds"
		delivery  = "leasekeeper_watch_delivery_delay_seconds"
		rejected  = "leasekeeper_stale_writes_rejected_total"
		acquireRt = "/v1/leases/{name}/acquire"
	)
	if m := s.scrape(); m.find(rejected, map[string]string{"source": "resource"}) == nil ||
		m.find(rejected, map[string]string{"source": "reported"}) == nil {
		t.Errorf("at start, %s lacks a source=resource or source=reported series", rejected)
	}

	// A watcher, open before anything happens.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	req, _ := http.NewRequestWithContext(wctx, http.MethodGet, s.url+"/v1/watch", nil)
	resp, err := s.hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/watch = %v, %v", resp, err)
	}
	defer resp.Body.Close()
	events := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				events <- strings.TrimPrefix(sc.Text(), "event: ")
			}
		}
		close(events)
	}()

	// w1 holds; w2 waits in line and gets the lease when w1 releases, 2 s later by the clock.
	code, first := s.post(ctx, "/v1/leases/job/acquire", `{"holder":"w1","ttl_ms":60000}`)
	if code != http.StatusOK {
		t.Fatalf("acquire w1 = %d %v", code, first)
	}
	if ev := <-events; ev != "acquired" {
		t.Fatalf("first watched event = %q, want acquired", ev)
	}
	granted := make(chan int, 1)
	go func() {
		code, _ := s.post(ctx, "/v1/leases/job/acquire", `{"holder":"w2","ttl_ms":60000,"wait_ms":60000}`)
		granted <- code
	}()
	waitFor(t, "w2 in line", func() bool { return s.svc.Line.Waiters("job") == 1 })
	s.clock.Advance(2 * time.Second)
	if code, body := s.post(ctx, "/v1/leases/job/release", fmt.Sprintf(`{"lease_id":%q}`, first["lease_id"])); code != http.StatusNoContent {
		t.Fatalf("release w1 = %d %v", code, body)
	}
	if code := <-granted; code != http.StatusOK {
		t.Fatalf("waiting acquire w2 = %d, want 200", code)
	}
	// w3 waits and leaves before its turn.
	w3ctx, leave := context.WithCancel(ctx)
	go s.post(w3ctx, "/v1/leases/job/acquire", `{"holder":"w3","ttl_ms":60000,"wait_ms":60000}`)
	waitFor(t, "w3 in line", func() bool { return s.svc.Line.Waiters("job") == 1 })
	leave()

	// A stale fenced write (w1's token, below w2's) and a rejection reported from elsewhere.
	tok := strconv.FormatInt(int64(first["token"].(float64)), 10)
	put := func(token string) int {
		req, _ := http.NewRequest(http.MethodPut, s.url+"/v1/resources/ledger", strings.NewReader("v"))
		req.Header.Set("Fencing-Token", token)
		resp, err := s.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	st, err := s.store.Get(ctx, "job")
	if err != nil || !st.Held || st.Holder != "w2" {
		t.Fatalf("Get(job) = %+v, %v; want held by w2", st, err)
	}
	if got := put(strconv.FormatInt(st.Token, 10)); got/100 != 2 {
		t.Fatalf("PUT with w2's token = %d", got)
	}
	if got := put(tok); got != http.StatusConflict {
		t.Fatalf("PUT with w1's older token = %d, want 409", got)
	}
	if code, body := s.post(ctx, "/v1/rejections", `{"resource":"elsewhere","presented_token":1,"current_fence":2}`); code != http.StatusAccepted {
		t.Fatalf("report a rejection = %d %v", code, body)
	}

	var m scraped
	waitFor(t, "the abandoned wait to be counted", func() bool {
		m = s.scrape()
		return m.count(wait, map[string]string{"outcome": "canceled"}) == 1
	})
	if ok := m.find(wait, map[string]string{"outcome": "ok"}).GetHistogram(); ok.GetSampleCount() != 1 || ok.GetSampleSum() != 2 {
		t.Errorf("%s{outcome=ok} = %d samples summing to %v s, want 1 of 2 s", wait, ok.GetSampleCount(), ok.GetSampleSum())
	}
	if got := m.count(long, map[string]string{"method": "POST", "route": acquireRt, "code": "200"}); got != 1 {
		t.Errorf("%s{POST acquire 200} = %d, want 1 (w2's wait)", long, got)
	}
	if got := m.count(short, map[string]string{"method": "POST", "route": acquireRt, "code": "200"}); got != 1 {
		t.Errorf("%s{POST acquire 200} = %d, want 1 (w1's, which did not wait)", short, got)
	}
	if got := m.counter(rejected, map[string]string{"source": "resource"}); got != 1 {
		t.Errorf("%s{source=resource} = %v, want 1", rejected, got)
	}
	if got := m.counter(rejected, map[string]string{"source": "reported"}); got != 1 {
		t.Errorf("%s{source=reported} = %v, want 1", rejected, got)
	}
	if got := m.count(delivery, nil); got < 1 {
		t.Errorf("%s has %d samples after the watcher got an event, want at least 1", delivery, got)
	}

	// The stream's duration is counted when it ends, and only among the long requests.
	stopWatch()
	waitFor(t, "the watch stream to be counted", func() bool {
		m = s.scrape()
		return m.count(long, map[string]string{"method": "GET", "route": "/v1/watch"}) == 1
	})
	if got := m.find(short, map[string]string{"route": "/v1/watch"}); got != nil {
		t.Errorf("%s has a /v1/watch series (%v), want watch streams only in %s", short, got, long)
	}

	t.Run("Promtool", func(t *testing.T) { promcheck.Check(t, s.scrapeText()) })
}
