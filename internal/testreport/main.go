// Command testreport runs go test with the arguments it is given and reports as it goes: a
// line for each package as it finishes (with how many of its tests ran and were skipped), a
// line every -every naming the packages still running, the output of each failing test, and
// at the end every skipped test with the reason it gave, so that a test that skips because a
// tool is missing is seen without -v. It exits with go test's status.
//
//	go run ./internal/testreport [-every 30s] -- -race -count=1 ./...
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	every := flag.Duration("every", 30*time.Second, "how often to name the packages still running (0: never)")
	flag.Parse()
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	os.Exit(run(context.Background(), goCmd, flag.Args(), *every, os.Stdout))
}

// run runs go test -json args and reports on w; it returns go test's exit status.
func run(ctx context.Context, goCmd string, args []string, every time.Duration, w io.Writer) int {
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(w, "testreport:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(w, "testreport:", err)
		return 1
	}
	r := newReport(w, time.Now)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			r.line(line)
		case <-tick:
			r.progress()
		}
	}
	werr := cmd.Wait()
	r.summary()
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		return ee.ExitCode()
	case werr != nil:
		fmt.Fprintln(w, "testreport:", werr)
		return 1
	case r.failed > 0:
		return 1
	}
	return 0
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string // build-output
}

// skip is a skipped test and the reason it gave.
type skip struct{ pkg, test, reason string }

// report follows the events of one go test -json run.
type report struct {
	w       io.Writer
	now     func() time.Time
	start   time.Time
	output  map[string][]string  // package + "\x00" + test ("" for the package's own) → its output lines
	running map[string]time.Time // package → when its first event came
	ran     map[string]int       // package → tests that passed, failed or skipped
	skipped map[string]int
	skips   []skip
	done    int
	failed  int
}

func newReport(w io.Writer, now func() time.Time) *report {
	return &report{w: w, now: now, start: now(), output: map[string][]string{}, running: map[string]time.Time{},
		ran: map[string]int{}, skipped: map[string]int{}}
}

func (r *report) line(s string) {
	var e event
	if err := json.Unmarshal([]byte(s), &e); err != nil || e.Action == "" {
		fmt.Fprintln(r.w, s) // not an event: go's own message
		return
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output)
		return
	case "build-fail":
		return
	}
	if _, ok := r.running[e.Package]; !ok && e.Package != "" {
		r.running[e.Package] = r.now()
	}
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		r.output[key] = append(r.output[key], e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			r.packageDone(e)
			return
		}
		r.ran[e.Package]++
		switch e.Action {
		case "fail":
			fmt.Fprintf(r.w, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(r.output[key], ""))
		case "skip":
			r.skipped[e.Package]++
			r.skips = append(r.skips, skip{e.Package, e.Test, reason(r.output[key])})
		}
		delete(r.output, key)
	}
}

// reason is what a skipped test said, without go test's own lines.
func reason(out []string) string {
	var said []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if _, msg, ok := strings.Cut(t, ".go:"); ok { // "x_test.go:12: message"
			if _, after, ok := strings.Cut(msg, ": "); ok {
				t = after
			}
		}
		said = append(said, t)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " / ")
}

func (r *report) packageDone(e event) {
	delete(r.running, e.Package)
	key := e.Package + "\x00"
	defer delete(r.output, key)
	if e.Action == "skip" && r.ran[e.Package] == 0 {
		return // no test files
	}
	r.done++
	status := "ok  "
	if e.Action == "fail" {
		status = "FAIL"
		r.failed++
		fmt.Fprint(r.w, strings.Join(r.output[key], ""))
	}
	note := ""
	if n := r.skipped[e.Package]; n > 0 {
		note = fmt.Sprintf(", %d skipped", n)
	}
	fmt.Fprintf(r.w, "%s %-60s %6.1fs  (%d tests%s)  [%d done, %s]\n", status, e.Package, e.Elapsed, r.ran[e.Package], note,
		r.done, r.now().Sub(r.start).Round(time.Second))
}

// progress names the packages still running, longest first.
func (r *report) progress() {
	if len(r.running) == 0 {
		return
	}
	pkgs := make([]string, 0, len(r.running))
	for p := range r.running {
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b string) int { return r.running[a].Compare(r.running[b]) })
	now := r.now()
	var parts []string
	for _, p := range pkgs {
		parts = append(parts, fmt.Sprintf("%s (%s)", p, now.Sub(r.running[p]).Round(time.Second)))
	}
	fmt.Fprintf(r.w, "… %s: %d packages done; running %s\n", now.Sub(r.start).Round(time.Second), r.done, strings.Join(parts, ", "))
}

// summary lists the skipped tests, grouped by package and reason, and the count of failures.
func (r *report) summary() {
	if len(r.skips) > 0 {
		fmt.Fprintf(r.w, "\n%d tests skipped:\n", len(r.skips))
		type group struct {
			pkg, reason string
			tests       []string
		}
		var groups []*group
		for _, s := range r.skips {
			i := slices.IndexFunc(groups, func(g *group) bool { return g.pkg == s.pkg && g.reason == s.reason })
			if i < 0 {
				groups = append(groups, &group{pkg: s.pkg, reason: s.reason})
				i = len(groups) - 1
			}
			groups[i].tests = append(groups[i].tests, s.test)
		}
		for _, g := range groups {
			tests := g.tests
			more := ""
			if len(tests) > 3 {
				more = fmt.Sprintf(" and %d more", len(tests)-3)
				tests = tests[:3]
			}
			fmt.Fprintf(r.w, "  %s: %s%s\n      %s\n", g.pkg, strings.Join(tests, ", "), more, g.reason)
		}
	}
	if r.failed > 0 {
		fmt.Fprintf(r.w, "\n%d of %d packages FAILED (%s)\n", r.failed, r.done, r.now().Sub(r.start).Round(time.Second))
		return
	}
	fmt.Fprintf(r.w, "\n%d packages passed (%s)\n", r.done, r.now().Sub(r.start).Round(time.Second))
}
