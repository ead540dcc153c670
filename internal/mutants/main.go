// Command mutants is the mutation check of leasekeeper: for each mutation in mutants.txt it
// builds the affected packages with one file changed (go test -overlay, so the tree is never
// edited), runs their tests within a time bound, and counts the mutation caught when they fail.
// It prints caught/total and exits non-zero when a mutation survives, does not build, or its
// text is no longer in the file.
//
//	go run ./internal/mutants [-list internal/mutants/mutants.txt] [-only SUBSTRING]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// mutation is one entry of the list.
type mutation struct {
	name    string
	file    string
	finds   []string // each replaced by the repl at the same index, exactly once
	repls   []string
	pkgs    []string
	run     string
	timeout time.Duration
}

func main() {
	list := flag.String("list", "internal/mutants/mutants.txt", "the mutation list")
	only := flag.String("only", "", "run only the mutations whose name contains this")
	flag.Parse()
	if err := run(*list, *only, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(list, only string, out io.Writer) error {
	f, err := os.Open(list)
	if err != nil {
		return err
	}
	defer f.Close()
	muts, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", list, err)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "leasekeeper-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	caught, total := 0, 0
	var bad []string
	for i, m := range muts {
		if only != "" && !strings.Contains(m.name, only) {
			continue
		}
		total++
		t0 := time.Now()
		verdict, detail := try(root, filepath.Join(tmp, strconv.Itoa(i)), m)
		fmt.Fprintf(out, "%-8s %6.1fs  %s  (%s)\n", verdict, time.Since(t0).Seconds(), m.name, detail)
		if verdict == "caught" {
			caught++
		} else {
			bad = append(bad, m.name+": "+verdict)
		}
	}
	fmt.Fprintf(out, "mutants: %d/%d caught in %.0fs\n", caught, total, time.Since(start).Seconds())
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// apply returns src, m's file, mutated: each find replaced, once; an error when a find is not
// in it exactly once (the text to mutate is gone or ambiguous: update the list).
func (m mutation) apply(src []byte) ([]byte, error) {
	for i, find := range m.finds {
		if n := bytes.Count(src, []byte(find)); n != 1 {
			return nil, fmt.Errorf("%q is in %s %d times, want once", find, m.file, n)
		}
		src = bytes.Replace(src, []byte(find), []byte(m.repls[i]), 1)
	}
	return src, nil
}

// try applies m through an overlay in dir and runs its tests: caught, survived, timeout,
// not-found (the text to mutate is gone: update the list) or no-build.
func try(root, dir string, m mutation) (verdict, detail string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "error", err.Error()
	}
	path := filepath.Join(root, m.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return "not-found", err.Error()
	}
	if src, err = m.apply(src); err != nil {
		return "not-found", err.Error()
	}
	mutated := filepath.Join(dir, filepath.Base(m.file))
	if err := os.WriteFile(mutated, src, 0o644); err != nil {
		return "error", err.Error()
	}
	j, _ := json.Marshal(map[string]map[string]string{"Replace": {path: mutated}})
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, j, 0o644); err != nil {
		return "error", err.Error()
	}
	args := []string{"test", "-count=1", "-overlay", overlay, "-timeout", m.timeout.String()}
	if m.run != "" {
		args = append(args, "-run", m.run)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, m.pkgs...)...)
	cmd.Dir = root
	// The fault suite builds the real binary itself: it applies the same overlay.
	cmd.Env = append(os.Environ(), "LEASEKEEPER_FAULTS_OVERLAY="+overlay)
	output, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return "timeout", fmt.Sprintf("no answer within %v", m.timeout+time.Minute)
	case err == nil:
		return "survived", "every test passed"
	case bytes.Contains(output, []byte("[build failed]")) || bytes.Contains(output, []byte("[setup failed]")):
		return "no-build", firstLines(output, 5)
	case bytes.Contains(output, []byte("panic: test timed out")):
		return "caught", "only by the test timeout of " + m.timeout.String() + ": " + failed(output)
	}
	return "caught", failed(output)
}

// failed names the failing tests in go test's output.
func failed(out []byte) string {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "--- FAIL: ") {
			names = append(names, strings.Fields(l)[2])
		}
	}
	if len(names) > 4 {
		names = append(names[:4], fmt.Sprintf("+%d", len(names)-4))
	}
	return strings.Join(names, " ")
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// parse reads the list: blocks that start with "[name]", then "key: value" lines (file, find,
// repl, pkgs, run, timeout); find and repl repeat in pairs, taken literally, or Go-quoted when
// spelled findq and replq (for tabs and newlines). Lines starting with # are comments.
func parse(r io.Reader) ([]mutation, error) {
	var out []mutation
	var cur *mutation
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			out = append(out, mutation{name: line[1 : len(line)-1], timeout: 5 * time.Minute})
			cur = &out[len(out)-1]
			continue
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q before the first [name]", n, line)
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want key: value, got %q", n, line)
		}
		val = strings.TrimSpace(val)
		if q, ok := strings.CutSuffix(key, "q"); ok && (q == "find" || q == "repl") {
			u, err := strconv.Unquote(val)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			key, val = q, u
		}
		switch key {
		case "file":
			cur.file = val
		case "find":
			cur.finds = append(cur.finds, val)
		case "repl":
			cur.repls = append(cur.repls, val)
		case "pkgs":
			cur.pkgs = strings.Fields(val)
		case "run":
			cur.run = val
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			cur.timeout = d
		default:
			return nil, fmt.Errorf("line %d: unknown key %q", n, key)
		}
	}
	for _, m := range out {
		if m.file == "" || len(m.finds) == 0 || len(m.finds) != len(m.repls) || len(m.pkgs) == 0 {
			return nil, fmt.Errorf("[%s]: needs file, pkgs and find/repl pairs", m.name)
		}
	}
	return out, sc.Err()
}
