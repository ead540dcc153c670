package wiretime_test

import (
	"encoding"
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

// The encoders append into a buffer of their own instead of quoting Format's string: they
// give Format's bytes for every instant, years beyond four digits and before year 1 included.
func TestMarshalIsFormat(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("CET", 3600), time.FixedZone("odd", -(9*3600 + 30*60 + 17))}
	var times []time.Time
	for _, y := range []int{-10000, -1, 0, 1, 999, 1969, 1970, 2026, 9999, 10000, 99999, 292277026} {
		for i, ns := range []int{0, 1, 999_999, 1_000_000, 120_000_000, 999_999_999} {
			times = append(times, time.Date(y, time.Month(1+i*2), 28+i%4, 23, 59, 59, ns, zones[i%len(zones)]))
		}
	}
	times = append(times, time.Time{}, time.Unix(0, 0), time.Unix(1<<40, 1), time.Unix(-1<<40, 999))
	for i := range 2000 {
		times = append(times, time.Unix(int64(i)*7_919_000_003-int64(1)<<42, int64(i)*104_729%1_000_000_000).In(zones[i%len(zones)]))
	}
	for _, in := range times {
		want := in.UTC().Format(wiretime.Layout)
		if got, err := (wiretime.Time{Time: in}).MarshalJSON(); err != nil || string(got) != `"`+want+`"` {
			t.Errorf("MarshalJSON(%v) = %s, %v; want %q", in, got, err, `"`+want+`"`)
		}
		if got, err := (wiretime.Time{Time: in}).MarshalText(); err != nil || string(got) != want {
			t.Errorf("MarshalText(%v) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// Every answer carries instants: encoding one takes one allocation, the slice it returns.
func TestMarshalAllocatesOnce(t *testing.T) {
	// Called through interfaces, as encoding/json does: the results escape.
	var j json.Marshaler = wiretime.From(time.Date(2026, 11, 29, 8, 45, 13, 123_000_000, time.UTC))
	var x encoding.TextMarshaler = j.(wiretime.Time)
	var out []byte
	if n := testing.AllocsPerRun(100, func() { out, _ = j.MarshalJSON() }); n != 1 {
		t.Errorf("MarshalJSON allocates %v times, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { out, _ = x.MarshalText() }); n != 1 {
		t.Errorf("MarshalText allocates %v times, want 1", n)
	}
	_ = out
}
