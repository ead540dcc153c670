package handlers_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestRejectionClipsUserAgent: what a rejection keeps of its client's User-Agent is cut to
// lease.MaxClientHeaderLen bytes, at a character boundary, for refused writes and for reports.
func TestRejectionClipsUserAgent(t *testing.T) {
	e := newEnv(t)
	l := e.acquire("job", "w", time.Minute)
	e.clock.Advance(time.Second)
	e.acquire("job2", "w", time.Minute)
	ua := strings.Repeat("agé/", 12000) // 60,000 bytes (under the 64 KiB of header fields), 2-byte characters throughout
	tok := strconv.FormatInt(l.Token, 10)
	e.do("PUT", "/v1/resources/db", strings.NewReader("v"), map[string]string{"Fencing-Token": strconv.FormatInt(l.Token+1, 10)})
	resp, b := e.do("PUT", "/v1/resources/db", strings.NewReader("late"), map[string]string{"Fencing-Token": tok, "User-Agent": ua})
	wantProblem(t, "stale PUT", resp, b, http.StatusConflict, api.ProblemCodeStaleToken)
	resp, b = e.do("POST", "/v1/rejections", strings.NewReader(`{"resource":"ext","presented_token":1,"current_fence":2}`),
		map[string]string{"Content-Type": "application/json", "User-Agent": ua})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/rejections = %d %s", resp.StatusCode, b)
	}
	_, b = e.do("GET", "/v1/rejections", nil, nil)
	var list api.RejectionList
	if err := json.Unmarshal(b, &list); err != nil || len(list.Rejections) != 2 {
		t.Fatalf("rejections = %s, %v; want 2", b, err)
	}
	for _, r := range list.Rejections {
		got := *r.UserAgent
		if len(got) > lease.MaxClientHeaderLen || len(got) < lease.MaxClientHeaderLen-utf8.UTFMax || !utf8.ValidString(got) || !strings.HasPrefix(ua, got) {
			t.Errorf("rejection of %s keeps a User-Agent of %d bytes (valid UTF-8 %t), want the first %d bytes or a character less",
				r.Resource, len(got), utf8.ValidString(got), lease.MaxClientHeaderLen)
		}
	}
}

// TestResourceQuota: a non-admin key's fenced resources stay within --max-resources-per-key
// and --max-resource-bytes-per-key; past them a write answers 507 quota_exceeded and writes
// nothing; an admin key is not held to them.
func TestResourceQuota(t *testing.T) {
	e := newEnvWith(t, func(cfg *handlers.Config) { cfg.Auth.ResourceQuota = lease.Quota{Resources: 3, Bytes: 100} })
	writer := servicetest.Key(t, e.store, auth.Writer, "billing-")
	l := e.acquire("billing-a", "w", time.Minute)
	tok := map[string]string{"Fencing-Token": strconv.FormatInt(l.Token, 10)}
	put := func(key, name string, size int) (*http.Response, []byte) {
		return e.bearerDo(key, "PUT", "/v1/resources/"+name, strings.Repeat("v", size), tok)
	}
	for i, size := range []int{40, 40, 20} {
		if resp, b := put(writer, "billing-"+strconv.Itoa(i), size); resp.StatusCode/100 != 2 {
			t.Fatalf("PUT billing-%d (%d bytes) = %d %s", i, size, resp.StatusCode, b)
		}
	}
	resp, b := put(writer, "billing-3", 1)
	wantProblem(t, "a fourth resource", resp, b, http.StatusInsufficientStorage, api.ProblemCodeQuotaExceeded)
	resp, b = put(writer, "billing-2", 21)
	wantProblem(t, "a write to 101 bytes in all", resp, b, http.StatusInsufficientStorage, api.ProblemCodeQuotaExceeded)
	if resp, b := put(writer, "billing-2", 20); resp.StatusCode != http.StatusOK {
		t.Errorf("PUT billing-2 again at its size = %d %s, want 200", resp.StatusCode, b)
	}
	if resp, _ := e.do("GET", "/v1/resources/billing-3", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET billing-3 after its write was refused = %d, want 404", resp.StatusCode)
	}
	for i := range 5 { // an admin key is not held to the quota
		if resp, b := put(e.key, "billing-admin-"+strconv.Itoa(i), 50); resp.StatusCode/100 != 2 {
			t.Fatalf("PUT billing-admin-%d as admin = %d %s", i, resp.StatusCode, b)
		}
	}
}
