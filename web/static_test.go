package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func TestStatic(t *testing.T) {
	for _, name := range []string{"app.css", "app.js", "favicon.svg"} {
		b, err := fs.ReadFile(Static(), name)
		if err != nil || len(b) == 0 {
			t.Errorf("Static() %s: %d bytes, %v", name, len(b), err)
		}
	}
}

func TestAssetVersion(t *testing.T) {
	v := AssetVersion()
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(v) {
		t.Errorf("AssetVersion() = %q, want 12 hex digits", v)
	}
	if again := AssetVersion(); again != v {
		t.Errorf("AssetVersion() = %q, then %q", v, again)
	}
}

// TestScriptContract checks that app.js speaks the same contract as the Go side.
func TestScriptContract(t *testing.T) {
	b, err := fs.ReadFile(Static(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	for _, want := range []string{
		`"` + FragmentHeader + `": "1"`,
		`getElementById("live")`,
		`"/v1/watch?prefix="`,
		`[data-expires-at]`,
		`dataset.done`,
		`time[data-rel]`,
		`[data-now]`,
		`form[data-confirm]`,
		`watchEvents`,
		`pollMs`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js does not contain %s", want)
		}
	}
	for _, typ := range []string{"acquired", "renewed", "released", "expired", "revoked", "rejected"} {
		if !strings.Contains(js, `"`+typ+`"`) {
			t.Errorf("app.js does not listen for %q", typ)
		}
	}
}
