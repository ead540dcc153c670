package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// runEnv is the environment run gives its command, as `run -h` and the README name it.
var runEnv = []string{"LEASEKEEPER_FENCING_TOKEN", "LEASEKEEPER_LEASE_NAME", "LEASEKEEPER_SLOT", "LEASEKEEPER_SERVER", "LEASEKEEPER_FENCING_TOKENS"}

// TestRunHelp: `run -h` names every variable the command gets (TestRun checks their values),
// and its synopsis asks only for what is required: --name and the command, not --ttl.
func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"run", "-h"}, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	help := stdout.String()
	for _, v := range runEnv {
		if !strings.Contains(help, v) {
			t.Errorf("run -h does not name %s:\n%s", v, help)
		}
	}
	synopsis, _, _ := strings.Cut(help, "\n")
	if want := "Usage: leasekeeper run --name NAME [flags] -- CMD [ARG]..."; synopsis != want {
		t.Errorf("run -h: synopsis %q, want %q", synopsis, want)
	}
	readme := strings.Join(readmeSection(t, "## The command line"), "\n")
	for _, v := range runEnv {
		if !strings.Contains(readme, v) {
			t.Errorf("the README's command-line section does not name %s", v)
		}
	}
}

// TestClientWarningsInSentences: with the server down, a client command says what happens in
// plain sentences on stderr; the log format is for --verbose.
func TestClientWarningsInSentences(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	env := map[string]string{"LEASEKEEPER_SERVER": down, "LEASEKEEPER_API_KEY": "lkk_x"}

	_, errOut, code := cliEnv(t, env, "lock", "job")
	if code != exTempFail || strings.Contains(errOut, "level=") || strings.Contains(errOut, "msg=") {
		t.Errorf("lock with the server down: exit %d, stderr:\n%s\nwant %d and no log format", code, errOut, exTempFail)
	}
	if !strings.Contains(errOut, "leasekeeper lock: acquire failed; retrying") {
		t.Errorf("lock with the server down: stderr:\n%s\nwant its retries said as sentences of leasekeeper lock", errOut)
	}
	_, errOut, _ = cliEnv(t, env, "lock", "--verbose", "job")
	if !strings.Contains(errOut, "level=WARN msg=") {
		t.Errorf("lock --verbose with the server down: stderr:\n%s\nwant the log format", errOut)
	}
}
