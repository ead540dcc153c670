package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// The caches of the official golang images (GOPATH=/go, HOME=/root) unless the stage sets
// GOMODCACHE or GOCACHE itself.
const (
	defaultGoModCache = "/go/pkg/mod"
	defaultGoCache    = "/root/.cache/go-build"
)

// The subcommand the image's HEALTHCHECK must run: the slim image has no curl.
var healthCommand = []string{"leasekeeper", "health"}

var numericUser = regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`)

// structureFindings checks what the image promises, from the parsed Dockerfile: no frontend pulled
// from the network, a numeric non-root USER, a WORKDIR that user owns, a HEALTHCHECK running
// `leasekeeper health`, cache mounts on the Go steps, and sources that exist in the build context.
func structureFindings(name string, dt []byte, buildContext fs.FS) []finding {
	c := &structure{name: name, ctx: buildContext}
	if ref, _, loc, ok := parser.DetectSyntax(dt); ok {
		c.add(firstLine(loc), "a `# syntax=` directive pulls the frontend %s from the network: use the builder's own", ref)
	}
	stages, err := parseStages(dt)
	if err != nil {
		c.add(0, "structure not checked: %v", err)
		return c.findings
	}
	final := stages[len(stages)-1]
	uid := c.user(final)
	c.workdir(final, uid)
	c.healthcheck(final)
	c.goCaches(stages)
	c.sources(stages)
	c.argsUsed(stages)
	return c.findings
}

// argsUsed checks every ARG a stage declares is used by a later instruction of that stage: an
// unused one (the version `make docker` passes, say) is silently dropped by the build.
func (c *structure) argsUsed(stages []instructions.Stage) {
	for _, st := range stages {
		for i, cmd := range st.Commands {
			arg, ok := cmd.(*instructions.ArgCommand)
			if !ok {
				continue
			}
			for _, kv := range arg.Args {
				used := slices.ContainsFunc(st.Commands[i+1:], func(later instructions.Command) bool {
					src := fmt.Sprint(later)
					return strings.Contains(src, "$"+kv.Key) || strings.Contains(src, "${"+kv.Key)
				})
				if !used {
					c.add(cmdLine(arg), "ARG %s is never used in its stage", kv.Key)
				}
			}
		}
	}
}

// parseStages parses the Dockerfile into its stages, at least one.
func parseStages(dt []byte) ([]instructions.Stage, error) {
	ast, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		return nil, err
	}
	stages, _, err := instructions.Parse(ast.AST, linter.New(&linter.Config{}))
	if err != nil {
		return nil, err
	}
	if len(stages) == 0 {
		return nil, errors.New("no stages")
	}
	return stages, nil
}

type structure struct {
	name     string
	ctx      fs.FS
	findings []finding
}

func (c *structure) add(line int, format string, args ...any) {
	c.findings = append(c.findings, finding{c.name, line, fmt.Sprintf(format, args...)})
}

func cmdLine(cmd instructions.Command) int {
	return firstLine(cmd.Location())
}

func stageLine(st instructions.Stage) int {
	return firstLine(st.Location)
}

// lastOf is the stage's last command of type T: the one that takes effect.
func lastOf[T instructions.Command](st instructions.Stage) (T, bool) {
	var last T
	found := false
	for _, cmd := range st.Commands {
		if c, ok := cmd.(T); ok {
			last, found = c, true
		}
	}
	return last, found
}

// user checks the final stage runs as a numeric, non-root user and returns its uid ("" if not).
func (c *structure) user(final instructions.Stage) string {
	u, ok := lastOf[*instructions.UserCommand](final)
	if !ok {
		c.add(stageLine(final), "the final stage has no USER: it would run as root")
		return ""
	}
	m := numericUser.FindStringSubmatch(u.User)
	if m == nil {
		c.add(cmdLine(u), "USER %s is not numeric (uid[:gid]): Kubernetes runAsNonRoot cannot check a name", u.User)
		return ""
	}
	if strings.TrimLeft(m[1], "0") == "" {
		c.add(cmdLine(u), "USER %s is root", u.User)
		return ""
	}
	return m[1]
}

// workdir checks the final stage sets an absolute WORKDIR and hands it to the user, by a
// `chown UID… DIR` in a RUN or a `COPY --chown=UID… … DIR`.
func (c *structure) workdir(final instructions.Stage, uid string) {
	w, ok := lastOf[*instructions.WorkdirCommand](final)
	if !ok {
		c.add(stageLine(final), "the final stage has no WORKDIR")
		return
	}
	if !path.IsAbs(w.Path) {
		c.add(cmdLine(w), "WORKDIR %s is not absolute", w.Path)
		return
	}
	if uid == "" {
		return // no user to own it; already reported
	}
	dir := path.Clean(w.Path)
	for _, cmd := range final.Commands {
		switch cmd := cmd.(type) {
		case *instructions.RunCommand:
			if chownsTo(strings.Join(cmd.CmdLine, " "), uid, dir) {
				return
			}
		case *instructions.CopyCommand:
			if ownerUID(cmd.Chown) == uid && path.Clean(cmd.DestPath) == dir {
				return
			}
		}
	}
	c.add(cmdLine(w), "WORKDIR %s is not given to user %s (no `chown %s… %s` in a RUN, no COPY --chown to it)", dir, uid, uid, dir)
}

func ownerUID(spec string) string {
	owner, _, _ := strings.Cut(spec, ":")
	return owner
}

// chownsTo reports whether a shell command line runs chown with owner uid on dir.
func chownsTo(script, uid, dir string) bool {
	words := strings.Fields(script)
	for i, w := range words {
		if w != "chown" {
			continue
		}
		var operands []string
		for _, a := range words[i+1:] {
			if a == "&&" || a == ";" || a == "||" || a == "|" {
				break
			}
			if !strings.HasPrefix(a, "-") {
				operands = append(operands, a)
			}
		}
		if len(operands) < 2 || ownerUID(operands[0]) != uid {
			continue
		}
		for _, a := range operands[1:] {
			if path.Clean(a) == dir {
				return true
			}
		}
	}
	return false
}

// healthcheck checks the final stage's HEALTHCHECK runs `leasekeeper health`.
func (c *structure) healthcheck(final instructions.Stage) {
	h, ok := lastOf[*instructions.HealthCheckCommand](final)
	if !ok || h.Health == nil || len(h.Health.Test) == 0 || h.Health.Test[0] == "NONE" {
		c.add(stageLine(final), "the final stage has no HEALTHCHECK running `%s`", strings.Join(healthCommand, " "))
		return
	}
	var words []string
	switch h.Health.Test[0] {
	case "CMD":
		words = h.Health.Test[1:]
	case "CMD-SHELL":
		words = strings.Fields(strings.Join(h.Health.Test[1:], " "))
	}
	if len(words) < len(healthCommand) || path.Base(words[0]) != healthCommand[0] || !slices.Equal(words[1:len(healthCommand)], healthCommand[1:]) {
		c.add(cmdLine(h), "HEALTHCHECK runs %q, not `%s`", strings.Join(words, " "), strings.Join(healthCommand, " "))
	}
}

// goCaches checks every RUN of the go command keeps its caches in cache mounts (the module cache
// for all of them, the build cache for those that compile), and that some RUN runs `go build`.
func (c *structure) goCaches(stages []instructions.Stage) {
	built := false
	for _, st := range stages {
		modCache, buildCache := defaultGoModCache, defaultGoCache
		for _, cmd := range st.Commands {
			if env, ok := cmd.(*instructions.EnvCommand); ok {
				for _, kv := range env.Env {
					switch kv.Key {
					case "GOMODCACHE":
						modCache = kv.Value
					case "GOCACHE":
						buildCache = kv.Value
					}
				}
			}
			run, ok := cmd.(*instructions.RunCommand)
			if !ok {
				continue
			}
			script := strings.Join(run.CmdLine, " ")
			sub := goSubcommands(script)
			if len(sub) == 0 {
				continue
			}
			built = built || slices.Contains(sub, "build")
			want := []string{modCache}
			if slices.ContainsFunc(sub, compiles) {
				want = append(want, buildCache)
			}
			for _, target := range want {
				if !hasCacheMount(run, target) {
					c.add(cmdLine(run), "RUN go %s has no --mount=type=cache,target=%s", strings.Join(sub, ", go "), target)
				}
			}
		}
	}
	if !built {
		c.add(0, "no RUN runs `go build`")
	}
}

func compiles(sub string) bool {
	return sub == "build" || sub == "install" || sub == "test" || sub == "run" || sub == "vet" || sub == "generate"
}

// goSubcommands lists the go subcommands a shell command line runs (`go build`, `go mod` …).
func goSubcommands(script string) []string {
	var out []string
	words := strings.Fields(script)
	for i := 0; i+1 < len(words); i++ {
		if path.Base(words[i]) == "go" && !strings.HasPrefix(words[i+1], "-") {
			out = append(out, words[i+1])
		}
	}
	return out
}

func hasCacheMount(run *instructions.RunCommand, target string) bool {
	// The parser leaves the mounts' key=value fields for the expansion of variables; these targets
	// are literal paths, so the identity expansion serves.
	if err := run.Expand(func(word string) (string, error) { return word, nil }); err != nil {
		return false
	}
	for _, m := range instructions.GetMounts(run) {
		if m.Type == instructions.MountTypeCache && path.Clean(m.Target) == path.Clean(target) {
			return true
		}
	}
	return false
}

// sources checks what the build takes from its context is there and not excluded by
// .dockerignore: COPY and ADD sources, and the packages `go build` is given (relative to the
// context, which the build copies whole). A COPY --from a stage must name a path that stage's
// RUN steps mention (its `-o` output).
func (c *structure) sources(stages []instructions.Stage) {
	ignored, err := c.ignoreMatcher()
	if err != nil {
		c.add(0, ".dockerignore: %v", err)
		return
	}
	byName := map[string]instructions.Stage{}
	for _, st := range stages {
		if st.Name != "" {
			byName[strings.ToLower(st.Name)] = st
		}
	}
	for _, st := range stages {
		for _, cmd := range st.Commands {
			switch cmd := cmd.(type) {
			case *instructions.CopyCommand:
				if cmd.From == "" {
					c.contextPaths(cmd, cmd.SourcePaths, ignored)
					continue
				}
				from, ok := byName[strings.ToLower(cmd.From)]
				if !ok {
					continue // an image, not a stage: nothing to look at here
				}
				for _, src := range cmd.SourcePaths {
					if !stageMentions(from, src) {
						c.add(cmdLine(cmd), "COPY --from=%s %s: no RUN of that stage mentions %s", cmd.From, src, src)
					}
				}
			case *instructions.AddCommand:
				c.contextPaths(cmd, cmd.SourcePaths, ignored)
			case *instructions.RunCommand:
				if slices.Contains(goSubcommands(strings.Join(cmd.CmdLine, " ")), "build") {
					c.contextPaths(cmd, goBuildPackages(cmd.CmdLine), ignored)
				}
			}
		}
	}
}

func (c *structure) ignoreMatcher() (*patternmatcher.PatternMatcher, error) {
	f, err := c.ctx.Open(".dockerignore")
	if errors.Is(err, fs.ErrNotExist) {
		return patternmatcher.New(nil)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return patternmatcher.New(patterns)
}

func (c *structure) contextPaths(cmd instructions.Command, paths []string, ignored *patternmatcher.PatternMatcher) {
	for _, p := range paths {
		if strings.Contains(p, "://") {
			continue // a URL
		}
		rel := path.Clean(strings.TrimPrefix(path.Clean("/"+p), "/"))
		if rel == "" {
			rel = "."
		}
		matches, err := fs.Glob(c.ctx, rel)
		if err != nil || len(matches) == 0 {
			c.add(cmdLine(cmd), "%s %s: not in the build context", strings.ToUpper(cmd.Name()), p)
			continue
		}
		if rel == "." {
			continue
		}
		for _, m := range matches {
			if ex, err := ignored.MatchesOrParentMatches(m); err == nil && ex {
				c.add(cmdLine(cmd), "%s %s: %s is excluded by .dockerignore", strings.ToUpper(cmd.Name()), p, m)
			}
		}
	}
}

// goBuildPackages lists the relative package paths (./…) on a command line running `go build`.
func goBuildPackages(cmdLine []string) []string {
	var out []string
	for _, w := range strings.Fields(strings.Join(cmdLine, " ")) {
		if strings.HasPrefix(w, "./") && !strings.Contains(w, "...") {
			out = append(out, w)
		}
	}
	return out
}

func stageMentions(st instructions.Stage, p string) bool {
	for _, cmd := range st.Commands {
		if run, ok := cmd.(*instructions.RunCommand); ok && slices.Contains(strings.Fields(strings.Join(run.CmdLine, " ")), p) {
			return true
		}
	}
	return false
}
