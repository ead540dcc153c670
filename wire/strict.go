package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/lease"
)

// StrictJSON refuses what encoding/json would accept and change without a word: bytes that are
// not UTF-8 and \u escapes of lone surrogates (both read as U+FFFD), and an object with two
// members of one name (the last would win). body may be anything: what is not JSON is left to
// the decoder to refuse, and the scan ends on any input (FuzzStrictJSON). Codes:
// invalid_request.
func StrictJSON(body []byte) error {
	if !utf8.Valid(body) {
		return lease.Errorf(lease.CodeInvalid, "the body is not valid UTF-8")
	}
	if bytes.IndexByte(body, '\\') < 0 && bytes.Count(body, []byte{':'}) <= 1 {
		return nil // no escape and at most one member: nothing below can fail
	}
	sc := jsonScan{b: body}
	sc.value()
	return sc.err
}

// StrictQuery refuses a query string (its parameters' names and values, percent-decoded) that
// is not UTF-8: every parameter this server reads is text, and PostgreSQL refuses such bytes
// in a statement. Codes: invalid_request.
func StrictQuery(q url.Values) error {
	for k, vs := range q {
		if !utf8.ValidString(k) {
			return lease.Errorf(lease.CodeInvalid, "a query parameter's name is not valid UTF-8")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return lease.Errorf(lease.CodeInvalid, "the query parameter %q is not valid UTF-8", k)
			}
		}
	}
	return nil
}

// jsonScan walks a valid JSON text, checking strings' escapes and objects' member names.
type jsonScan struct {
	b   []byte
	i   int
	err error
}

func (s *jsonScan) fail(format string, args ...any) {
	if s.err == nil {
		s.err = lease.Errorf(lease.CodeInvalid, format, args...)
	}
	s.i = len(s.b) // stop every loop
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScan) value() {
	s.space()
	if s.i >= len(s.b) {
		return
	}
	switch s.b[s.i] {
	case '{':
		s.object()
	case '[':
		s.i++
		for s.space(); s.i < len(s.b) && s.b[s.i] != ']'; s.space() {
			s.value()
			s.space()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
			}
		}
		s.i++
	case '"':
		s.str()
	default: // a number, true, false or null
		start := s.i
		for s.i < len(s.b) && !delim(s.b[s.i]) {
			s.i++
		}
		if s.i == start {
			s.i++ // not JSON (a stray delimiter): step over it, never loop on it
		}
	}
}

func (s *jsonScan) object() {
	s.i++
	var small [8][]byte // request objects have a few members: no allocation for them
	names := small[:0]
	for s.space(); s.i < len(s.b) && s.b[s.i] != '}'; s.space() {
		start := s.i
		escaped := s.str()
		if s.err != nil || s.i > len(s.b) || s.i-start < 2 {
			return // not JSON: the decoder's to refuse
		}
		name := s.b[start+1 : s.i-1]
		if escaped {
			// Two spellings of one name ("a" and "\u0061") are one member.
			var n string
			if json.Unmarshal(s.b[start:s.i], &n) == nil {
				name = []byte(n)
			}
		}
		for _, seen := range names {
			if bytes.Equal(seen, name) {
				s.fail("the object has the member %s twice", s.b[start:s.i])
				return
			}
		}
		names = append(names, name)
		s.space()
		s.i++ // ':'
		s.value()
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
	s.i++
}

// str reads a string from its opening quote and reports whether it has escapes. An escape of
// a high surrogate must be followed by one of a low surrogate, and a low one preceded by a
// high one.
func (s *jsonScan) str() (escaped bool) {
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.i++
			return escaped
		case '\\':
			escaped = true
			if s.i+1 < len(s.b) && s.b[s.i+1] == 'u' {
				r := s.hex(s.i + 2)
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					if s.i+7 < len(s.b) && s.b[s.i+6] == '\\' && s.b[s.i+7] == 'u' {
						if lo := s.hex(s.i + 8); lo >= 0xDC00 && lo <= 0xDFFF {
							s.i += 12
							continue
						}
					}
					s.fail("the body has a lone surrogate \\u%04X: not a character", r)
					return escaped
				case r >= 0xDC00 && r <= 0xDFFF:
					s.fail("the body has a lone surrogate \\u%04X: not a character", r)
					return escaped
				}
				s.i += 6
				continue
			}
			s.i += 2
		default:
			s.i++
		}
	}
	return escaped
}

// delim reports whether c ends a number or literal.
func delim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// hex reads the four hex digits at i; -1 when they are not there.
func (s *jsonScan) hex(i int) rune {
	if i+4 > len(s.b) {
		return -1
	}
	var r rune
	for _, c := range s.b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// TrailingData reports whether body is a JSON value followed by more than white space. A body
// that is not JSON at all is the validator's to refuse. json.Valid, one scan without a copy,
// settles the usual case (one value, nothing after it); only the rest is decoded.
func TrailingData(body []byte) bool {
	if json.Valid(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return false
	}
	_, err := dec.Token()
	return err != io.EOF
}
