package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

const repoRoot = "../.."

func repoDockerfile(t *testing.T) string {
	t.Helper()
	dt, err := os.ReadFile(repoRoot + "/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(dt)
}

func findingsOf(t *testing.T, dt string, buildContext fs.FS) []string {
	t.Helper()
	fs, err := check(context.Background(), "Dockerfile", []byte(dt), buildContext)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func TestRepositoryDockerfile(t *testing.T) {
	if got := findingsOf(t, repoDockerfile(t), os.DirFS(repoRoot)); len(got) != 0 {
		t.Fatalf("the repository's Dockerfile has findings:\n%s", strings.Join(got, "\n"))
	}
}

// Each case breaks the repository's Dockerfile one way; the check must say so.
func TestBrokenDockerfiles(t *testing.T) {
	orig := repoDockerfile(t)
	cases := []struct {
		name     string
		old, new string // replaced once in the Dockerfile; old must be there
		want     string
		wantLine string // when set, the finding's line is the one holding this text
	}{
		{"lowercase from as", "FROM golang:1.26-bookworm AS build", "from golang:1.26-bookworm as build", "ConsistentInstructionCasing", "from golang"},
		{"lowercase as", "FROM golang:1.26-bookworm AS build", "FROM golang:1.26-bookworm as build", "FromAsCasing", "FROM golang"},
		{"CMD in shell form", `CMD ["serve"]`, "CMD serve", "JSONArgsRecommended", "CMD serve"},
		{"undefined variable", "ENV LEASEKEEPER_ADDR=0.0.0.0:8080", "ENV LEASEKEEPER_ADDR=0.0.0.0:${PORTT}", "UndefinedVar", "ENV LEASEKEEPER_ADDR"},
		{"unknown instruction", "EXPOSE 8080", "EXPOSES 8080", "unknown instruction: EXPOSES", "EXPOSES"},
		{"USER by name", "USER 10001:10001", "USER leasekeeper", "is not numeric", "USER leasekeeper"},
		{"USER root", "USER 10001:10001", "USER 0:0", "is root", ""},
		{"no USER", "USER 10001:10001\n", "", "no USER", ""},
		{"no HEALTHCHECK", "HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \\\n" +
			`  CMD ["leasekeeper", "health", "--server", "http://127.0.0.1:8080", "--timeout", "4s"]` + "\n", "", "no HEALTHCHECK", ""},
		{"HEALTHCHECK NONE last", `ENTRYPOINT ["leasekeeper"]`, "HEALTHCHECK NONE\n" + `ENTRYPOINT ["leasekeeper"]`, "no HEALTHCHECK", ""},
		{"HEALTHCHECK with curl", `CMD ["leasekeeper", "health",`, `CMD ["curl", "-f",`, "not `leasekeeper health`", ""},
		{"no WORKDIR", "WORKDIR /data\n", "", "no WORKDIR", ""},
		{"WORKDIR owned by root", "chown 10001:10001 /data", "chown 0:0 /data", "is not given to user 10001", ""},
		{"syntax directive", "# No", "# syntax=docker/dockerfile:1\n# No", "pulls the frontend docker/dockerfile:1", ""},
		{"check directive", "# No", "# check=skip=all\n# No", "a `# check=` directive", ""},
		{"go build without build cache", "--mount=type=cache,target=/root/.cache/go-build ", "", "RUN go build has no --mount=type=cache,target=/root/.cache/go-build", ""},
		{"go mod download without cache", "RUN --mount=type=cache,target=/go/pkg/mod go mod download", "RUN go mod download", "RUN go mod has no --mount=type=cache,target=/go/pkg/mod", ""},
		{"COPY of a missing file", "COPY go.mod go.sum ./", "COPY go.mod go.sum go.work ./", "COPY go.work: not in the build context", ""},
		{"go build of a missing package", "./cmd/leasekeeper", "./cmd/leasekeeperd", "RUN ./cmd/leasekeeperd: not in the build context", ""},
		{"ARG never used", "-X main.version=${VERSION}", "-X main.version=dev", "ARG VERSION is never used in its stage", "ARG VERSION"},
		{"COPY --from a path the stage does not build", "COPY --from=build /out/leasekeeper", "COPY --from=build /out/lk", "no RUN of that stage mentions /out/lk", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("the Dockerfile no longer contains %q: update this case", tc.old)
			}
			broken := strings.Replace(orig, tc.old, tc.new, 1)
			got := findingsOf(t, broken, os.DirFS(repoRoot))
			hit := ""
			for _, f := range got {
				if strings.Contains(f, tc.want) {
					hit = f
					break
				}
			}
			if hit == "" {
				t.Fatalf("no finding with %q; got:\n%s", tc.want, strings.Join(got, "\n"))
			}
			if tc.wantLine != "" {
				line := lineOf(t, broken, tc.wantLine)
				if prefix := fmt.Sprintf("Dockerfile:%d: ", line); !strings.HasPrefix(hit, prefix) {
					t.Errorf("finding %q is not on line %d", hit, line)
				}
			}
		})
	}
}

func lineOf(t *testing.T, text, sub string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the text", sub)
	return 0
}

// A source the .dockerignore excludes is as missing to the build as one that is not there.
func TestDockerignoreExcludesSource(t *testing.T) {
	buildContext := fstest.MapFS{
		"go.mod":                  {Data: []byte("module m\n")},
		"go.sum":                  {},
		"cmd/leasekeeper/main.go": {Data: []byte("package main\n")},
		".dockerignore":           {Data: []byte("*.db\ncmd/leasekeeper\n")},
	}
	got := findingsOf(t, repoDockerfile(t), buildContext)
	if len(got) != 1 || !strings.Contains(got[0], "RUN ./cmd/leasekeeper: cmd/leasekeeper is excluded by .dockerignore") {
		t.Fatalf("got %q, want the go build package excluded by .dockerignore", got)
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/Dockerfile.bad"
	if err := os.WriteFile(bad, []byte(strings.Replace(repoDockerfile(t), `CMD ["serve"]`, "CMD serve", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-context", repoRoot}, 0, "lint clean"},
		{[]string{"-context", repoRoot, "-f", bad}, 1, "JSONArgsRecommended"},
		{[]string{"-context", dir}, 2, ""},
		{[]string{"stray"}, 2, ""},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String(), tc.out) {
			t.Errorf("run %q = %d, stdout %q, stderr %q; want %d with %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out)
		}
	}
}

// leasekeeperBinary is the binary the image would run: LEASEKEEPER_BINARY (make dockerfile-check
// sets it), or one built here.
func leasekeeperBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("LEASEKEEPER_BINARY"); b != "" {
		return b
	}
	bin := t.TempDir() + "/leasekeeper"
	cmd := exec.Command("go", "-C", repoRoot, "build", "-o", bin, "./cmd/leasekeeper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build leasekeeper: %v\n%s", err, out)
	}
	return bin
}

// The image's HEALTHCHECK, run with the real binary against the image's command, passes; broken
// ways are caught.
func TestHealthcheckRuns(t *testing.T) {
	bin := leasekeeperBinary(t)
	orig := repoDockerfile(t)
	cases := []struct {
		name     string
		old, new string
		want     string
	}{
		{"as written", "", "", ""},
		{"a flag health does not have", `"--timeout", "4s"]`, `"--tmeout", "4s"]`, "HEALTHCHECK failed against the running server (exit 2)"},
		{"another port", `"http://127.0.0.1:8080"`, `"http://127.0.0.1:9"`, "HEALTHCHECK failed against the running server (exit 1)"},
		{"a command that is no server", `CMD ["serve"]`, `CMD ["version"]`, "exited before the HEALTHCHECK passed"},
		{"a check that always passes", `CMD ["leasekeeper", "health", "--server", "http://127.0.0.1:8080", "--timeout", "4s"]`, `CMD ["leasekeeper", "version"]`, "HEALTHCHECK exits 0 with the server stopped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("the Dockerfile no longer contains %q: update this case", tc.old)
			}
			dt := strings.Replace(orig, tc.old, tc.new, 1)
			var got []string
			for _, f := range healthFindings(context.Background(), "Dockerfile", []byte(dt), bin, 3*time.Second) {
				got = append(got, f.String())
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("findings:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Fatalf("no finding with %q; got:\n%s", tc.want, strings.Join(got, "\n"))
			}
		})
	}
}
