package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

func TestBackupWhileServing(t *testing.T) {
	dir := t.TempDir()
	db, out := filepath.Join(dir, "lk.db"), filepath.Join(dir, "copy.db")
	s := serveInProcess(t, nil, "--addr", "127.0.0.1:0", "--db", db)
	r, err := s.c.AcquireLeaseWithResponse(context.Background(), "job", nil, api.AcquireRequest{Holder: "w1", TtlMs: 60000})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("acquire = %v, %v", r, err)
	}
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string {
		if k == "LEASEKEEPER_DB" {
			return db
		}
		return ""
	}
	if err := run(context.Background(), []string{"backup", "--out", out}, getenv, &stdout, &stderr); err != nil {
		t.Fatalf("backup = %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "backed up") {
		t.Errorf("stdout = %q", stdout.String())
	}
	st, err := sqlite.Open(context.Background(), out, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Get(context.Background(), "job")
	if err != nil || got.Token != r.JSON200.Token {
		t.Errorf("the backup's job = %+v, %v; want token %d", got, err, r.JSON200.Token)
	}
	for _, args := range [][]string{{"backup"}, {"backup", "--out", out}, {"backup", "--out", filepath.Join(dir, "x.db"), "extra"}} {
		if err := run(context.Background(), args, getenv, &stdout, &stderr); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{{"serve", "-h"}, {"backup", "-h"}, {"get", "-h"}, {"run", "-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
			t.Errorf("run(%q) = %v, want nil", args, err)
		}
		if stdout.Len()+stderr.Len() == 0 {
			t.Errorf("run(%q) printed nothing, want the usage", args)
		}
	}
}
