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
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestRejectionClipsUserAgent: what a rejection keeps of its client's User-Agent is cut to
// lease.MaxClientHeaderLen bytes, at a character boundary, for refused writes and for reports.
func TestRejectionClipsUserAgent(t *testing.T) {
	e := newEnv(t)
	l := e.acquire("job", "w", time.Minute)
	e.clock.Advance(time.Second)
	e.acquire("job2", "w", time.Minute)
	ua := strings.Repeat("agé/", 15000) // 75,000 bytes, 2-byte characters throughout
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
