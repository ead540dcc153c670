package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"runtime/debug"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/subrequests/lint"
	"github.com/moby/buildkit/solver/pb"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

const buildkitModule = "github.com/moby/buildkit"

// buildkitVersion is the linter's version, as go.mod pins it.
var buildkitVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == buildkitModule {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}()

// checkDirective turns on every rule, the experimental ones too, for the lint run. It goes on a
// line of its own above the Dockerfile, which is why its warnings are reported one line up.
const checkDirective = "# check=experimental=all\n"

// check runs the linter and the structural checks and returns every finding. An error means the
// check itself could not run.
func check(ctx context.Context, name string, dt []byte, buildContext fs.FS) ([]finding, error) {
	var findings []finding
	// The checker decides which rules run: a directive in the file could switch some off.
	if _, _, loc, ok := parser.ParseDirective("check", dt); ok {
		findings = append(findings, finding{name, firstLine(loc), "a `# check=` directive: remove it, every rule runs here"})
		return findings, nil
	}
	lf, err := lintFindings(ctx, name, dt)
	if err != nil {
		return nil, err
	}
	findings = append(findings, lf...)
	findings = append(findings, structureFindings(name, dt, buildContext)...)
	return findings, nil
}

// lintFindings runs BuildKit's Dockerfile linter as `docker build --check` does, offline: once
// with every rule for the warnings, and once on the file as it is for the error, if any, whose
// message counts lines itself.
func lintFindings(ctx context.Context, name string, dt []byte) ([]finding, error) {
	all, err := lintRun(ctx, name, append([]byte(checkDirective), dt...))
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, w := range all.Warnings {
		var ranges []*pb.Range
		if w.Location != nil {
			ranges = w.Location.Ranges
		}
		out = append(out, finding{name, rangeLine(ranges) - 1, fmt.Sprintf("%s: %s (%s)", w.RuleName, w.Detail, w.URL)})
	}
	plain, err := lintRun(ctx, name, dt)
	if err != nil {
		return nil, err
	}
	if e := plain.Error; e != nil {
		out = append(out, finding{name, rangeLine(e.Location.Ranges), "error: " + e.Message})
	}
	return out, nil
}

func lintRun(ctx context.Context, name string, src []byte) (*lint.LintResults, error) {
	// The lint results name their source by a marshalled LLB definition, as the builder's own
	// Dockerfile source does; any definition serves.
	st := llb.Local("dockerfile")
	def, err := st.Marshal(ctx)
	if err != nil {
		return nil, fmt.Errorf("marshal a source definition: %w", err)
	}
	sm := llb.NewSourceMap(&st, name, "Dockerfile", src)
	sm.Definition = def
	res, err := dockerfile2llb.DockerfileLint(ctx, src, dockerfile2llb.ConvertOpt{
		SourceMap:    sm,
		MetaResolver: offlineResolver{},
	})
	if err != nil {
		return nil, fmt.Errorf("lint: %w", err)
	}
	return res, nil
}

func rangeLine(ranges []*pb.Range) int {
	if len(ranges) == 0 {
		return 0
	}
	return int(ranges[0].Start.Line)
}

func firstLine(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// offlineResolver answers the linter's base-image questions without a registry: every image is a
// one-layer image of the platform asked for, with no environment, user or working directory of its
// own. The rules that look at the base image (InvalidBaseImagePlatform) therefore cannot fire; the
// others do not need it.
type offlineResolver struct{}

func (offlineResolver) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	var img ocispecs.Image
	if p := opt.Platform; p != nil {
		img.Platform = *p
	}
	img.RootFS = ocispecs.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes([]byte(ref))}}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(img); err != nil {
		return "", "", nil, err
	}
	return ref, "", buf.Bytes(), nil
}
