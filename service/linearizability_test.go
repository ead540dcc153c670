package service_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// The sequential model of one lease name, with ttls long enough that nothing expires: at most
// one holder (invariant 1), every grant's token above every token before (invariant 2), and
// only the holder's own lease_id releases it (invariant 6).
type lockState struct {
	held  bool
	token int64 // the current or last grant's token
}

type lockInput struct {
	op    string // acquire, release, get
	token int64  // for release: the grant the client releases
}

type lockOutput struct {
	ok    bool  // acquire granted, release answered 204, get answered held
	token int64 // acquire: the token granted; get: the token shown
}

var lockModel = porcupine.Model{
	Init: func() any { return lockState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(lockState), in.(lockInput), out.(lockOutput)
		switch i.op {
		case "acquire":
			if !o.ok {
				return st.held, st
			}
			return !st.held && o.token > st.token, lockState{held: true, token: o.token}
		case "release":
			ok := st.held && st.token == i.token
			return o.ok == ok, lockState{held: false, token: st.token}
		case "get":
			return o.ok == st.held && o.token == st.token, st
		}
		return false, st
	},
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%s(%d) -> %v", in.(lockInput).op, in.(lockInput).token, out)
	},
}

// TestLinearizable drives one name from several HTTP clients at once and checks with porcupine
// that every answer they saw fits one sequential order of the model above.
func TestLinearizable(t *testing.T) {
	srv, _ := servicetest.Start(t, service.Config{}, sqlite.Options{})
	checkLinearizable(t, []string{srv.URL})
}

// TestLinearizablePostgresReplicas: the same on three replicas over one PostgreSQL database,
// each client sending every request to the next replica in turn.
func TestLinearizablePostgresReplicas(t *testing.T) {
	checkLinearizable(t, pgReplicas(t, 3))
}

// checkLinearizable runs the clients against the servers at urls (one request to each in turn)
// and checks their history.
func checkLinearizable(t *testing.T, urls []string) {
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var turn atomic.Int64
	call := func(method, path, body string) (int, map[string]any) {
		base := urls[int(turn.Add(1))%len(urls)]
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := servicetest.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	token := func(m map[string]any) int64 {
		f, _ := m["token"].(float64)
		return int64(f)
	}

	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in lockInput, out lockOutput, called, returned int64) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: called, Output: out, Return: returned})
	}
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for range 12 {
				t0 := now()
				code, m := call(http.MethodPost, "/v1/leases/lin/acquire", fmt.Sprintf(`{"holder":"c%d","ttl_ms":60000}`, c))
				got := lockOutput{ok: code == 200, token: token(m)}
				if code != 200 {
					got.token = 0
				}
				record(c, lockInput{op: "acquire"}, got, t0, now())
				if code != 200 {
					t0 = now()
					code, m := call(http.MethodGet, "/v1/leases/lin", "")
					held, _ := m["held"].(bool)
					record(c, lockInput{op: "get"}, lockOutput{ok: code == 200 && held, token: token(m)}, t0, now())
					continue
				}
				t0 = now()
				code, _ = call(http.MethodPost, "/v1/leases/lin/release", fmt.Sprintf(`{"lease_id":%q}`, m["lease_id"]))
				record(c, lockInput{op: "release", token: got.token}, lockOutput{ok: code == 204}, t0, now())
			}
		})
	}
	wg.Wait()
	if res := porcupine.CheckOperationsTimeout(lockModel, history, 30*time.Second); res != porcupine.Ok {
		t.Fatalf("the history of %d operations is %s, want linearizable: %v", len(history), res, history)
	}
	t.Logf("%d operations from 6 clients on %d servers: linearizable", len(history), len(urls))
}
