package leasekeeper_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leasekeeper/leasekeeper"

// designSection returns the lines of docs/DESIGN.md under the heading "## "+title.
func designSection(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/DESIGN.md has no section %q", title)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return strings.Split(s, "\n")
}

var backtickedRE = regexp.MustCompile("`([^`]+)`")

// packageRule is one row of docs/DESIGN.md's package map.
type packageRule struct {
	may     []string // the module's packages it may import
	stdOnly bool     // nothing outside the standard library either
}

// packageMap reads the package map of docs/DESIGN.md: package (relative to the module, "." for
// its root) → what it may import.
func packageMap(t *testing.T) map[string]packageRule {
	t.Helper()
	rules := map[string]packageRule{}
	for _, line := range designSection(t, "Packages and what each may import") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue
		}
		r := packageRule{stdOnly: strings.Contains(cells[2], "standard library only")}
		for _, m := range backtickedRE.FindAllStringSubmatch(cells[2], -1) {
			r.may = append(r.may, m[1])
		}
		for _, m := range backtickedRE.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := rules[m[1]]; dup {
				t.Errorf("docs/DESIGN.md lists %s twice", m[1])
			}
			rules[m[1]] = r
		}
	}
	if len(rules) < 10 {
		t.Fatalf("docs/DESIGN.md's package map has %d packages, want the whole module", len(rules))
	}
	return rules
}

// TestPackageMap checks the package map of docs/DESIGN.md against go list -deps: every package
// of the module is in it, every package in it exists, and no package imports one of the
// module's packages that its row does not allow (nor, where the row says so, anything outside
// the standard library).
func TestPackageMap(t *testing.T) {
	rules := packageMap(t)
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		p, ok := strings.CutPrefix(path, module+"/")
		return p, ok
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ours := rel(fields[0])
		if !ours {
			continue
		}
		seen[pkg] = true
		r, ok := rules[pkg]
		if !ok {
			t.Errorf("package %s is not in docs/DESIGN.md's package map: add its row", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if p, ours := rel(imp); ours {
				if !slices.Contains(r.may, p) {
					t.Errorf("%s imports %s, which docs/DESIGN.md does not allow it (may import %v)", pkg, p, r.may)
				}
			} else if first, _, _ := strings.Cut(imp, "/"); r.stdOnly && strings.Contains(first, ".") {
				t.Errorf("%s imports %s: docs/DESIGN.md allows it the standard library only", pkg, imp)
			}
		}
	}
	for pkg := range rules {
		if !seen[pkg] {
			t.Errorf("docs/DESIGN.md's package map lists %s, which is not a package of the module", pkg)
		}
	}
}

// invariantRE finds a citation of numbered invariants: "invariant 5", "invariants 2, 3 and 5".
var invariantRE = regexp.MustCompile(`(?i)\binvariants? (\d+(?:(?:, | and )\d+)*)\b`)

// TestDesignReferences checks what the repository cites of the design: every "DESIGN.md" is
// docs/DESIGN.md (a relative link from docs/ itself), and every numbered invariant it cites is
// one docs/DESIGN.md defines.
func TestDesignReferences(t *testing.T) {
	defined := map[string]bool{}
	for _, line := range designSection(t, "The invariants") {
		if m := regexp.MustCompile(`^(\d+)\. \*\*`).FindStringSubmatch(line); m != nil {
			defined[m[1]] = true
		}
	}
	if len(defined) != 10 {
		t.Fatalf("docs/DESIGN.md defines invariants %v, want 1 to 10", defined)
	}
	bareRE := regexp.MustCompile(`DESIGN(\.md|'s)`)
	bare := func(line string) bool { // DESIGN.md without docs/, other than a link's text
		for _, m := range bareRE.FindAllStringIndex(line, -1) {
			if !strings.HasSuffix(line[:m[0]], "/") && !strings.HasPrefix(line[m[1]:], "](") {
				return true
			}
		}
		return false
	}
	cites := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sql", ".yaml", ".templ", ".sh":
		default:
			return nil
		}
		if path == "design_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if bare(line) && !strings.HasPrefix(path, "docs"+string(filepath.Separator)) {
				t.Errorf("%s:%d cites DESIGN without its path: %q; write docs/DESIGN.md", path, i+1, strings.TrimSpace(line))
			}
			for _, m := range invariantRE.FindAllStringSubmatch(line, -1) {
				for _, n := range regexp.MustCompile(`\d+`).FindAllString(m[1], -1) {
					cites++
					if !defined[n] {
						t.Errorf("%s:%d cites invariant %s, which docs/DESIGN.md does not define", path, i+1, n)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cites < 30 {
		t.Errorf("found %d citations of numbered invariants, want the repository's (over 30): is the pattern still right?", cites)
	}
}
