package leasekeeper_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeLayout returns the first column of the README's Layout table.
func readmeLayout(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	s, _, _ = strings.Cut(s, "\n## ")
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(s, -1) {
		rows = append(rows, m[1])
	}
	return rows
}

// TestReadmeLayoutListsEveryFolder: every top-level folder of the repository (not the ones
// .gitignore keeps out of it) has its row in the README's Layout table, and every row names
// something that exists.
func TestReadmeLayoutListsEveryFolder(t *testing.T) {
	rows := readmeLayout(t)
	listed := map[string]bool{}
	for _, r := range rows {
		listed[strings.TrimSuffix(r, "/")] = true
		if _, err := os.Stat(r); err != nil {
			t.Errorf("the README's Layout lists %s: %v", r, err)
		}
	}
	ignored, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == ".git" || strings.Contains("\n"+string(ignored), "\n/"+name+"/\n") {
			continue
		}
		if !listed[name] {
			t.Errorf("the README's Layout table has no row for the folder %s/", name)
		}
	}
}

// TestDocsQuoteNoMutationCount: the documents do not quote a count of the mutations, which
// went stale as the list grew; internal/mutants/mutants.txt is the record, and make mutants
// prints the count.
func TestDocsQuoteNoMutationCount(t *testing.T) {
	countRE := regexp.MustCompile(`(?i)\b\d+\s*/\s*\d+ caught|\b\d+ (?:mutations|mutants)\b|mutants\.txt\W+has \d+`)
	for _, doc := range []string{"README.md", "FAULTS.md", "SECURITY.md", filepath.FromSlash("docs/DESIGN.md"), filepath.FromSlash("docs/PRIMITIVES.md")} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := countRE.FindString(line); m != "" {
				t.Errorf("%s:%d quotes a count of the mutations (%q): name internal/mutants/mutants.txt instead", doc, i+1, m)
			}
		}
	}
}
