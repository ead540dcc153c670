package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// targetLabels are the labels Prometheus adds to every scraped series: the rules and the board
// may group by them though no scrape carries them.
var targetLabels = []string{"job", "instance"}

// backendOnly are the metrics one backend exports and the other does not; the rules and the
// board may name them, and must find them on that backend.
var backendOnly = map[string]string{
	"leasekeeper_store_disk_free_bytes":        "SQLite", // a file on a local file system
	"leasekeeper_leases_stretched_at_start":    "SQLite", // PostgreSQL's clock is the database's: no restart stretches
	"leasekeeper_store_queue_depth":            "SQLite", // the group-commit writer's queue
	"leasekeeper_watch_delivery_delay_seconds": "",       // both; listed for the histogram's suffixes
}

// exported is what one scrape holds: every series name (histograms' _bucket, _sum, _count
// included) and the labels it has.
type exported map[string][]string

// scrapeAfterTraffic serves db, drives every kind of operation the rules and the board look
// at (grants, conflicts, renewals, releases, a wait, a stale write, a rate-limited key, a
// watched name) and returns the scrape of /metrics.
func scrapeAfterTraffic(t *testing.T, db []string) exported {
	t.Helper()
	s := serveInProcess(t, nil, append([]string{"--addr", "127.0.0.1:0", "--key-rate", "0.01", "--key-burst", "1",
		"--metrics-lease", "leader"}, db...)...)
	ctx := context.Background()
	a, err := s.c.AcquireLeaseWithResponse(ctx, "leader", nil, api.AcquireRequest{Holder: "w1", TtlMs: 10000})
	if err != nil || a.JSON200 == nil {
		t.Fatalf("AcquireLease(leader) = %v, %v", a.Status(), err)
	}
	wait := int64(1)
	if r, err := s.c.AcquireLeaseWithResponse(ctx, "leader", nil, api.AcquireRequest{Holder: "w2", TtlMs: 10000, WaitMs: &wait}); err != nil || r.StatusCode() != http.StatusConflict {
		t.Errorf("AcquireLease(held, wait 1 ms) = %v, %v; want 409", r.Status(), err)
	}
	if r, err := s.c.RenewLeaseWithResponse(ctx, "leader", api.RenewRequest{LeaseId: *a.JSON200.LeaseId}); err != nil || r.JSON200 == nil {
		t.Errorf("RenewLease() = %v, %v", r.Status(), err)
	}
	if r, err := s.c.PutResourceWithBodyWithResponse(ctx, "report", &api.PutResourceParams{FencingToken: &a.JSON200.Token}, "text/plain", strings.NewReader("v1")); err != nil || r.StatusCode() >= 300 {
		t.Errorf("PutResource(token %d) = %v, %v", a.JSON200.Token, r.Status(), err)
	}
	stale := a.JSON200.Token - 1
	if r, err := s.c.PutResourceWithBodyWithResponse(ctx, "report", &api.PutResourceParams{FencingToken: &stale}, "text/plain", strings.NewReader("v0")); err != nil || r.StatusCode() != http.StatusConflict {
		t.Errorf("PutResource(stale token) = %v, %v; want 409", r.Status(), err)
	}
	if r, err := s.c.ReleaseLeaseWithResponse(ctx, "leader", api.ReleaseRequest{LeaseId: *a.JSON200.LeaseId}); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Errorf("ReleaseLease() = %v, %v", r.Status(), err)
	}
	if r, err := s.c.RenewLeaseWithResponse(ctx, "leader", api.RenewRequest{LeaseId: *a.JSON200.LeaseId}); err != nil || r.StatusCode() != http.StatusConflict {
		t.Errorf("RenewLease(released) = %v, %v; want 409 lease_lost", r.Status(), err)
	}
	k, err := s.c.CreateKeyWithResponse(ctx, api.KeyRequest{Label: "reader", Role: api.Reader})
	if err != nil || k.JSON201 == nil {
		t.Fatalf("CreateKey() = %v, %v", k.Status(), err)
	}
	rc := &http.Client{Transport: servicetest.BearerTransport{Key: k.JSON201.Key}}
	limited := false
	for range 3 {
		resp, err := rc.Get(s.url + "/v1/leases")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		limited = limited || resp.StatusCode == http.StatusTooManyRequests
	}
	if !limited {
		t.Error("a reader key at 0.01 requests a second, burst 1, was never answered 429")
	}

	_, body := scrape(t, s.hc, s.url)
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	got := exported{}
	for name, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		got[name] = labels
		if mf.GetType().String() == "HISTOGRAM" {
			got[name+"_bucket"] = append(slices.Clone(labels), "le")
			got[name+"_sum"], got[name+"_count"] = labels, labels
		}
	}
	return got
}

// A query as the rules and the board write it.
var (
	stringRE   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	identRE    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	templateRE = regexp.MustCompile(`\$labels\.(\w+)|\{\{\s*(\w+)\s*\}\}`)
)

// promqlWords are PromQL's keywords: never metric names.
var promqlWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}

// query is what a query names: metrics, and labels by the metric they are matched on (""
// for the labels it groups or joins by).
type query struct {
	metrics []string
	labels  map[string][]string
}

func parseQuery(expr string) query {
	q := query{labels: map[string][]string{}}
	// Grafana's variables stand for durations.
	expr = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m").Replace(expr)
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcherRE.FindAllStringSubmatch(stringRE.ReplaceAllString(m[2], `""`), -1) {
			q.labels[m[1]] = append(q.labels[m[1]], l[1])
		}
	}
	expr = selectorRE.ReplaceAllString(expr, "$1")
	for _, m := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				q.labels[""] = append(q.labels[""], l)
			}
		}
	}
	expr = rangeRE.ReplaceAllString(groupingRE.ReplaceAllString(stringRE.ReplaceAllString(expr, `""`), " "), " ")
	for _, at := range identRE.FindAllStringIndex(expr, -1) {
		word := expr[at[0]:at[1]]
		if at[0] > 0 && strings.ContainsRune("0123456789.$", rune(expr[at[0]-1])) {
			continue // a number's exponent or unit, a variable
		}
		if strings.HasPrefix(strings.TrimLeft(expr[at[1]:], " "), "(") || slices.Contains(promqlWords, word) {
			continue // a function or a keyword
		}
		q.metrics = append(q.metrics, word)
	}
	return q
}

// operatingQueries reads the rules and the board: each query with where it is, the recording
// rules' names, and the labels the alerts' annotations and the board's legends name.
func operatingQueries(t *testing.T) (queries map[string]string, records []string) {
	t.Helper()
	queries = map[string]string{}
	rules, err := os.ReadFile("../../deploy/prometheus/leasekeeper.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, line := range strings.Split(string(rules), "\n") {
		f := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(f, "- record: "):
			name = strings.TrimPrefix(f, "- record: ")
			records = append(records, name)
		case strings.HasPrefix(f, "- alert: "):
			name = strings.TrimPrefix(f, "- alert: ")
		case strings.HasPrefix(f, "expr: "):
			queries["rules "+name] = strings.TrimPrefix(f, "expr: ")
		case strings.Contains(f, "$labels."):
			// The labels an annotation names must come out of the alert's query: joined to it,
			// they are checked as its own.
			for _, m := range templateRE.FindAllStringSubmatch(f, -1) {
				if m[1] != "" {
					queries["rules "+name] += " + on (" + m[1] + ") vector(0)"
				}
			}
		}
	}
	board, err := os.ReadFile("../../deploy/grafana/leasekeeper.json")
	if err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			title, _ := v["title"].(string)
			if e, ok := v["expr"].(string); ok {
				queries["board "+path+title] = e
				if l, ok := v["legendFormat"].(string); ok {
					for _, m := range templateRE.FindAllStringSubmatch(l, -1) {
						queries["board "+path+title] += " + on (" + m[2] + ") vector(0)"
					}
				}
			}
			for k, c := range v {
				walk(path+title+"/"+k+" ", c)
			}
		case []any:
			for _, c := range v {
				walk(path, c)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(board, &doc); err != nil {
		t.Fatalf("deploy/grafana/leasekeeper.json: %v", err)
	}
	walk("", doc)
	return queries, records
}

// TestOperatingFilesMatchScrape scrapes a live server on each backend after traffic and fails
// when the Prometheus rules or the Grafana board name a metric it does not export, or a label
// that metric does not have.
func TestOperatingFilesMatchScrape(t *testing.T) {
	scrapes := map[string]exported{}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { scrapes[b.name] = scrapeAfterTraffic(t, b.args(t)) })
	}
	if t.Failed() || len(scrapes) != len(backends) {
		t.Fatal("no scrape of every backend")
	}
	checkOperatingFiles(t, scrapes)
}

func checkOperatingFiles(t *testing.T, scrapes map[string]exported) {
	t.Helper()
	queries, records := operatingQueries(t)
	if len(queries) < 20 {
		t.Fatalf("read %d queries from deploy/, want the rules' and the board's", len(queries))
	}
	union := exported{}
	for _, s := range scrapes {
		for name, labels := range s {
			union[name] = append(union[name], labels...)
		}
	}
	for where, expr := range queries {
		q := parseQuery(expr)
		var have []string // every label of every metric the query names
		for _, m := range q.metrics {
			if slices.Contains(records, m) {
				continue // a recording rule's output, checked as its own query
			}
			labels, ok := union[m]
			if !ok {
				t.Errorf("%s names %s, which no backend exports (query %s)", where, m, expr)
				continue
			}
			have = append(have, labels...)
			for backend, s := range scrapes {
				if _, ok := s[m]; !ok && backendOnly[m] == "" {
					t.Errorf("%s names %s, which %s does not export: list it in backendOnly if that is by design", where, m, backend)
				}
			}
		}
		for metric, labels := range q.labels {
			for _, l := range labels {
				switch {
				case slices.Contains(targetLabels, l):
				case metric == "" && slices.Contains(have, l):
				case metric != "" && slices.Contains(union[metric], l):
				case metric == "" && l == "le":
				default:
					t.Errorf("%s uses the label %q, which %s lacks (query %s)", where, l, orElse(metric, "no metric it names"), expr)
				}
			}
		}
	}
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMetricsLeaseFlag: --metrics-lease takes names from the flag (winning) or the
// environment, and refuses a name that is not one and more than service.MaxWatchedLeases.
func TestMetricsLeaseFlag(t *testing.T) {
	parse := func(env map[string]string, args ...string) ([]string, error) {
		c, err := parseServe(args, func(k string) string { return env[k] }, io.Discard, io.Discard)
		return c.watched, err
	}
	if got, err := parse(nil, "--metrics-lease", "a,b", "--metrics-lease", "c"); err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("--metrics-lease a,b --metrics-lease c = %q, %v", got, err)
	}
	env := map[string]string{"LEASEKEEPER_METRICS_LEASES": "x, y"}
	if got, err := parse(env); err != nil || !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("LEASEKEEPER_METRICS_LEASES=x, y gives %q, %v", got, err)
	}
	if got, err := parse(env, "--metrics-lease", "z"); err != nil || !slices.Equal(got, []string{"z"}) {
		t.Errorf("the flag with the environment set gives %q, %v; want the flag's", got, err)
	}
	many := make([]string, service.MaxWatchedLeases+1)
	for i := range many {
		many[i] = "n" + strconv.Itoa(i)
	}
	for _, args := range [][]string{{"--metrics-lease", "no/slash"}, {"--metrics-lease", strings.Join(many, ",")}} {
		if _, err := parse(nil, args...); err == nil {
			t.Errorf("parseServe(%.40q…) = nil, want a usage error", args)
		}
	}
	if _, err := parse(map[string]string{"LEASEKEEPER_METRICS_LEASES": "bad name"}); err == nil {
		t.Error("LEASEKEEPER_METRICS_LEASES=bad name: parseServe = nil, want an error")
	}
}

// TestServeExportsTraces runs serve with --otlp-endpoint pointed at a stand-in collector: a
// request sent with a traceparent comes back as spans of that trace (the request's, the
// store's batch) in an OTLP/HTTP export, flushed at shutdown at the latest.
func TestServeExportsTraces(t *testing.T) {
	var mu sync.Mutex
	var got []byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("collector: %v", err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		if r.URL.Path != "/v1/traces" {
			t.Errorf("collector: POST %s, want /v1/traces", r.URL.Path)
		}
		mu.Lock()
		got = append(got, b...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	s := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "lk.db"), "--otlp-endpoint", collector.URL)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/leases/job/acquire", strings.NewReader(`{"holder":"w","ttl_ms":60000}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := s.hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire with a traceparent = %v, %v", resp, err)
	}
	resp.Body.Close()
	if err := s.shutdown(t); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	id, _ := hex.DecodeString(traceID)
	for _, want := range [][]byte{id, []byte("POST /v1/leases/{name}/acquire"), []byte("store.batch"), []byte("leasekeeper")} {
		if !bytes.Contains(got, want) {
			t.Errorf("the collector got no %q in %d bytes of spans", want, len(got))
		}
	}
	if bytes.Contains(got, []byte(testAdminKey)) {
		t.Error("the exported spans hold the API key")
	}
}

// TestOTLPEndpointFlag: tracing is off unless --otlp-endpoint or the standard variable is set,
// and a flag that is not an http(s) URL is a usage error.
func TestOTLPEndpointFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		on   bool
	}{
		{nil, nil, false},
		{[]string{"--otlp-endpoint", "http://collector:4318"}, nil, true},
		{nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
	} {
		c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		if err != nil || c.tracing != tt.on {
			t.Errorf("parseServe(%q, env %v): tracing %v, %v; want %v", tt.args, tt.env, c.tracing, err, tt.on)
		}
	}
	if _, err := parseServe([]string{"--otlp-endpoint", "collector:4318"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("--otlp-endpoint collector:4318 (no scheme) = nil, want a usage error")
	}
}

// scrape returns the status and body of GET url/metrics with hc.
func scrape(t *testing.T, hc *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s/metrics: %v", url, err)
	}
	return resp.StatusCode, body
}
