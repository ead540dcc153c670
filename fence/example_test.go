package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/leasekeeper/leasekeeper/fence"
)

func ExampleTable_Upsert() {
	dir, err := os.MkdirTemp("", "fence-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "app.db")+"?_busy_timeout=5000")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE jobs (name TEXT PRIMARY KEY, state TEXT NOT NULL, fence INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	jobs := fence.Table{Name: "jobs", KeyColumn: "name", FenceColumn: "fence"}
	ctx := context.Background()
	fmt.Println(jobs.Upsert(ctx, db, "nightly", 42, map[string]any{"state": "running"}))
	fmt.Println(jobs.Upsert(ctx, db, "nightly", 43, map[string]any{"state": "done"}))
	err = jobs.Upsert(ctx, db, "nightly", 42, map[string]any{"state": "running"})
	fmt.Println(errors.Is(err, fence.ErrStaleToken), err)
	// Output:
	// <nil>
	// <nil>
	// true fence "nightly": stale token 42, current fence is 43
}

func ExampleMiddleware() {
	var marks fence.Memory
	h := fence.Middleware(&marks)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := fence.TokenFromContext(r.Context())
		fmt.Fprintf(w, "stored with token %d", token)
	}))

	for _, token := range []string{"7", "6", ""} {
		req := httptest.NewRequest(http.MethodPut, "/files/report.csv", nil)
		if token != "" {
			req.Header.Set(fence.Header, token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 stored with token 7
	// 409 {"type":"about:blank","title":"Conflict","status":409,"code":"stale_token","detail":"fencing token 6 is below the current fence 7","presented_token":6,"current_fence":7}
	// 428 {"type":"about:blank","title":"Precondition Required","status":428,"code":"precondition_required","detail":"this request must carry a Fencing-Token header"}
}
