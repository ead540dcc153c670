// Package wiretime is the wire form of an instant in leasekeeper's API: RFC 3339 in UTC with
// exactly three fractional digits ("2026-11-29T08:45:13.120Z"), as the contract promises.
// encoding/json's time.Time drops trailing zeros ("…13.12Z", "…13Z"); this type does not.
// The generated code uses it through api/go-types.overlay.yaml (x-go-type), so it imports
// nothing from the project.
package wiretime

import (
	"fmt"
	"time"
)

// Layout is the format of every instant on the wire.
const Layout = "2006-01-02T15:04:05.000Z"

// Time is an instant that encodes with Layout. It decodes any RFC 3339 time.
type Time struct{ time.Time }

// From returns t as a wire time, in UTC and truncated to the millisecond.
func From(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// bufLen holds an instant in Layout with its quotes, and the six more fractional digits that
// AppendFormat writes before it cuts them to three.
const bufLen = len(Layout) + 2 + 6

// MarshalJSON encodes t with Layout. It appends to a slice made to size, one allocation
// where formatting to a string and quoting it took two: every answer carries instants.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, bufLen)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, Layout)
	return append(b, '"'), nil
}

// UnmarshalJSON decodes an RFC 3339 time, with or without fractional seconds.
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("wiretime: %s is not a JSON string", b)
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("wiretime: %w", err)
	}
	t.Time = v
	return nil
}

// MarshalText encodes t with Layout (for query parameters and headers).
func (t Time) MarshalText() ([]byte, error) {
	return t.UTC().AppendFormat(make([]byte, 0, bufLen), Layout), nil
}

// UnmarshalText decodes an RFC 3339 time.
func (t *Time) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return fmt.Errorf("wiretime: %w", err)
	}
	t.Time = v
	return nil
}
