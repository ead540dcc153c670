package wiretime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/wiretime"
)

func TestMarshalAlwaysThreeDigits(t *testing.T) {
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 29, 8, 45, 13, 0, time.UTC), `"2026-11-29T08:45:13.000Z"`},
		{time.Date(2026, 11, 29, 8, 45, 13, 120_000_000, time.UTC), `"2026-11-29T08:45:13.120Z"`},
		{time.Date(2026, 11, 29, 8, 45, 13, 123_456_789, time.UTC), `"2026-11-29T08:45:13.123Z"`},
		{time.Date(2026, 11, 29, 9, 45, 13, 5_000_000, time.FixedZone("CET", 3600)), `"2026-11-29T08:45:13.005Z"`},
	} {
		b, err := json.Marshal(wiretime.From(tc.in))
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.in, b, err, tc.want)
		}
	}
}

func TestUnmarshal(t *testing.T) {
	for _, in := range []string{`"2026-11-29T08:45:13Z"`, `"2026-11-29T08:45:13.12Z"`, `"2026-11-29T09:45:13.120+01:00"`} {
		var got wiretime.Time
		if err := json.Unmarshal([]byte(in), &got); err != nil {
			t.Errorf("Unmarshal(%s) = %v", in, err)
		}
	}
	for _, in := range []string{`12`, `"yesterday"`, `""`} {
		var got wiretime.Time
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("Unmarshal(%s) = nil, want an error", in)
		}
	}
}
