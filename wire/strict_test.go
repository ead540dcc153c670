package wire

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// duplicateMember is the reference for StrictJSON's member check: encoding/json's own tokens,
// each object's names decoded and compared.
func duplicateMember(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj   bool
		names map[string]bool
		key   bool // the next string token is a member name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: v == '{', names: map[string]bool{}, key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.obj && top.key {
				if top.names[v] {
					return true
				}
				top.names[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

// loneSurrogate is the reference for StrictJSON's escape check: decoding a text whose strings
// come out with U+FFFD that the text does not spell.
func loneSurrogate(body []byte) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	out, _ := json.Marshal(v)
	spelled := bytes.Count(body, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(body), []byte(`\ufffd`))
	return bytes.Count(out, []byte("\uFFFD")) > spelled
}

// FuzzStrictJSON: strictJSON never panics on any input, and on a valid JSON text it refuses
// exactly the texts that are not UTF-8, spell a lone surrogate or give an object a member
// twice.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `["\udc00"]`,
		`{"a":{"b":1},"c":{"b":1}}`, "{\"a\":\"\xff\"}", `[{"a":1,"a":1}]`, `{"a":[1,{"b":[],"b":{}}]}`, `"\\ud800"`, `{"\ud800\udc00":1,"𐀀":2}`, `{"a":"\ufffd"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := StrictJSON(body)
		if !json.Valid(body) {
			return // any answer, but no panic; the decoder refuses it
		}
		want := !utf8.Valid(body) || duplicateMember(body) || loneSurrogate(body)
		if (err != nil) != want {
			t.Fatalf("StrictJSON(%q) = %v, want refused %v", body, err, want)
		}
	})
}

// BenchmarkStrictJSON: the cost strictJSON adds to an acquire's body, beside json.Valid's scan
// that every body already gets.
func BenchmarkStrictJSON(b *testing.B) {
	body := []byte(`{"holder":"worker-3@host-a","ttl_ms":15000,"metadata":{"job":"nightly","shard":7}}`)
	b.Run("StrictJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if StrictJSON(body) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
