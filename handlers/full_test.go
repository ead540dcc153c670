package handlers_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestDiskFullAnswers: when the database cannot grow, writes answer 503 unavailable with
// Retry-After, /readyz fails, reads still answer, and writes work again once space is freed,
// without a restart. (store/sqlite's TestDiskFull covers the log and the WAL.)
func TestDiskFullAnswers(t *testing.T) {
	e := newEnvStore(t, sqlite.Options{MaxPageCount: 64}, nil)
	l := e.acquire("job", "w1", time.Hour)
	put := func(name string) (*http.Response, []byte) {
		return e.do(http.MethodPut, "/v1/resources/"+name, bytes.NewReader(bytes.Repeat([]byte("x"), 8<<10)),
			map[string]string{"Fencing-Token": strconv.FormatInt(l.Token, 10), "Content-Type": "text/plain"})
	}
	var resp *http.Response
	var body []byte
	for i := 0; i < 1000; i++ {
		if resp, body = put(fmt.Sprintf("fill-%d", i)); resp.StatusCode != http.StatusCreated {
			break
		}
	}
	wantProblem(t, "PUT on a full database", resp, body, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("PUT on a full database: no Retry-After")
	}
	var r *api.AcquireLeaseResponse
	for i := 0; i < 100; i++ { // the first may still fit in a page's free space
		var err error
		r, err = e.c.AcquireLeaseWithResponse(e.ctx, fmt.Sprintf("another-%d", i), nil, api.AcquireRequest{Holder: "w2", TtlMs: 60000,
			Metadata: &api.Metadata{"pad": string(bytes.Repeat([]byte("p"), 3000))}})
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusOK {
			break
		}
	}
	wantProblem(t, "AcquireLease on a full database", r.HTTPResponse, r.Body, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
	if r.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("AcquireLease on a full database: no Retry-After")
	}
	ready, err := e.c.ReadyzWithResponse(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "Readyz while writes fail", ready.HTTPResponse, ready.Body, http.StatusServiceUnavailable, api.ProblemCodeUnavailable)
	if ready.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("Readyz while writes fail: no Retry-After")
	}
	for _, path := range []string{"/v1/resources/fill-0", "/v1/leases/job", "/v1/leases", "/v1/rejections", "/", "/healthz"} {
		if resp, body := e.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s while writes fail = %d %s, want 200", path, resp.StatusCode, body)
		}
	}

	for i := range 3 {
		if d, err := e.c.DeleteResourceWithResponse(e.ctx, fmt.Sprintf("fill-%d", i)); err != nil || d.StatusCode() != http.StatusNoContent {
			t.Fatalf("DeleteResource(fill-%d) on a full database = %v, %v; want 204, freeing space", i, status(d), err)
		}
	}
	if ready, err := e.c.ReadyzWithResponse(e.ctx); err != nil || ready.JSON200 == nil {
		t.Errorf("Readyz after a write succeeded = %v, %v; want 200", status(ready), err)
	}
	e.acquire("after", "w3", time.Minute)
	if resp, body := put("after"); resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT after space was freed = %d %s, want 201", resp.StatusCode, body)
	}
}
