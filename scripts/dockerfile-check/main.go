// Command dockerfile-check checks the repository's Dockerfile without a container engine:
// BuildKit's own Dockerfile linter (the rules `docker build --check` runs, the experimental ones
// included), the structure the image promises (structure.go) and, given -binary, the image's
// command and HEALTHCHECK run with that binary (health.go). It exits 1 and prints every finding
// when there is one, 2 on bad usage or an unreadable file.
//
// It is a module of its own so that BuildKit never enters the service's go.mod; run it with
// `make dockerfile-check`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dockerfile-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	contextDir := fs.String("context", ".", "the build context: the directory `docker build` is given")
	file := fs.String("f", "", "the Dockerfile (default CONTEXT/Dockerfile)")
	binary := fs.String("binary", "", "a built leasekeeper: when set, the image's command and HEALTHCHECK are run with it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "dockerfile-check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	name := *file
	if name == "" {
		name = filepath.Join(*contextDir, "Dockerfile")
	}
	dt, err := os.ReadFile(name)
	if err != nil {
		fmt.Fprintf(stderr, "dockerfile-check: %v\n", err)
		return 2
	}
	findings, err := check(ctx, name, dt, os.DirFS(*contextDir))
	if err != nil {
		fmt.Fprintf(stderr, "dockerfile-check: %s: %v\n", name, err)
		return 2
	}
	if *binary != "" {
		findings = append(findings, healthFindings(ctx, name, dt, *binary, 0)...)
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(stdout, "%s: %d finding(s)\n", name, len(findings))
		return 1
	}
	fmt.Fprintf(stdout, "%s: BuildKit %s lint clean (all rules, experimental included); structure as promised\n", name, buildkitVersion)
	if *binary != "" {
		fmt.Fprintf(stdout, "%s: HEALTHCHECK passes against the image's command run with %s, fails once it stops\n", name, *binary)
	}
	return 0
}

// A finding is one problem, printed as FILE:LINE: WHAT.
type finding struct {
	file string
	line int
	what string
}

func (f finding) String() string {
	if f.line <= 0 {
		return fmt.Sprintf("%s: %s", f.file, f.what)
	}
	return fmt.Sprintf("%s:%d: %s", f.file, f.line, f.what)
}
