package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEveryMutationApplies: each mutation of the list still finds its text, once, in its
// file, so that a change that moves or removes the text fails here, in seconds, rather than
// at the end of make mutants.
func TestEveryMutationApplies(t *testing.T) {
	root := filepath.Join("..", "..")
	f, err := os.Open(filepath.Join(root, "internal", "mutants", "mutants.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	muts, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) == 0 {
		t.Fatal("no mutations in the list")
	}
	for _, m := range muts {
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		if _, err := m.apply(src); err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
	}
}
