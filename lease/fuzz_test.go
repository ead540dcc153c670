package lease_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// FuzzValidateName: ValidateName never panics and accepts exactly the names of docs/DESIGN.md's
// pattern.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"", "a", "job-1", ".a", "a/b", "a b", "é", "a\n", strings.Repeat("z", 200), strings.Repeat("z", 201), "a:b.c_d-e", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := lease.ValidateName(name)
		if want := namePattern.MatchString(name); (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v, want accepted %v (the pattern)", name, err, want)
		}
		if err != nil && !lease.IsCode(err, lease.CodeInvalid) {
			t.Fatalf("ValidateName(%q) = %v, want code invalid_request", name, err)
		}
	})
}

// FuzzValidateHolder: ValidateHolder never panics, and what it accepts is 1 to 256
// characters of UTF-8 with nothing a reader cannot see: no control character, no format
// character (zero-width, bidirectional controls).
func FuzzValidateHolder(f *testing.F) {
	for _, s := range []string{"", "w", "worker-3@host-a", "a\u200bb", "\u202eabc", "a\x85", "\xff", "é", "a\u00adb", strings.Repeat("h", 257)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, holder string) {
		err := lease.ValidateHolder(holder)
		if err != nil {
			if !lease.IsCode(err, lease.CodeInvalid) {
				t.Fatalf("ValidateHolder(%q) = %v, want code invalid_request", holder, err)
			}
			return
		}
		if n := utf8.RuneCountInString(holder); n < 1 || n > lease.MaxHolderLen || !utf8.ValidString(holder) {
			t.Fatalf("ValidateHolder(%q) accepted %d characters (valid UTF-8 %v)", holder, n, utf8.ValidString(holder))
		}
		for _, r := range holder {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("ValidateHolder(%q) accepted U+%04X, a character a reader cannot see", holder, r)
			}
		}
	})
}

// FuzzNormalizeMetadata: NormalizeMetadata never panics; what it accepts is a compact JSON
// object of at most 4 KiB meaning the same as the input, and normalizing it again changes
// nothing; what it refuses is an invalid_request.
func FuzzNormalizeMetadata(f *testing.F) {
	for _, s := range []string{"", "null", "{}", `{"a":1}`, `{ "a" : [1, {"b": null}] }`, "[1]", `"s"`, "{", `{"a":1}x`, "  \n", `{"k":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := lease.NormalizeMetadata(in)
		if err != nil {
			if !lease.IsCode(err, lease.CodeInvalid) || out != nil {
				t.Fatalf("NormalizeMetadata(%q) = %q, %v; want nil and invalid_request", in, out, err)
			}
			return
		}
		if out == nil {
			if trimmed := bytes.TrimSpace(in); len(trimmed) != 0 && string(trimmed) != "null" {
				t.Fatalf("NormalizeMetadata(%q) = nil, nil; want an error or an object", in)
			}
			return
		}
		if len(out) > lease.MaxMetadataLen || out[0] != '{' || !json.Valid(out) {
			t.Fatalf("NormalizeMetadata(%q) = %q, want a valid JSON object of at most %d bytes", in, out, lease.MaxMetadataLen)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, out); err != nil || !bytes.Equal(compact.Bytes(), out) {
			t.Fatalf("NormalizeMetadata(%q) = %q, not compact", in, out)
		}
		again, err := lease.NormalizeMetadata(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("NormalizeMetadata(NormalizeMetadata(%q)) = %q, %v; want %q", in, again, err, out)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("NormalizeMetadata(%q) accepted input encoding/json refuses: %v", in, err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("NormalizeMetadata(%q) changed the meaning (-in +out):\n%s", in, diff)
		}
	})
}

// FuzzIDToken: IDToken never panics, and finds a token only in a string of NewID's shape that
// carries it first.
func FuzzIDToken(f *testing.F) {
	for _, s := range []string{lease.NewID(1796000000000000), lease.NewID(-1), "lk_", "lk_abc", "", "lk_" + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		token, ok := lease.IDToken(id)
		if !ok {
			return
		}
		if !strings.HasPrefix(id, lease.IDPrefix) || len(id) != len(lease.NewID(0)) {
			t.Fatalf("IDToken(%q) = %d, true for a string not of NewID's shape", id, token)
		}
		raw, err := base64.RawURLEncoding.DecodeString(id[len(lease.IDPrefix):])
		if err != nil || len(raw) != 32 || int64(binary.BigEndian.Uint64(raw)) != token {
			t.Fatalf("IDToken(%q) = %d: not the token its first 8 bytes hold (%x, %v)", id, token, raw, err)
		}
	})
}
