package web

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRelativeTime(t *testing.T) {
	tests := []struct {
		name   string
		offset time.Duration
		want   string
	}{
		{"Now", 0, "now"},
		{"UnderASecondAhead", 999 * time.Millisecond, "now"},
		{"UnderASecondAgo", -999 * time.Millisecond, "now"},
		{"OneSecondAhead", time.Second, "in 1 s"},
		{"SecondsAheadRoundDown", 12*time.Second + 900*time.Millisecond, "in 12 s"},
		{"SecondsAgo", -12*time.Second - 900*time.Millisecond, "12 s ago"},
		{"LastSecondOfAMinute", 59*time.Second + 999*time.Millisecond, "in 59 s"},
		{"OneMinute", time.Minute, "in 1 min"},
		{"MinutesAgo", -3*time.Minute - 50*time.Second, "3 min ago"},
		{"LastMinuteOfAnHour", -59*time.Minute - 59*time.Second, "59 min ago"},
		{"OneHour", time.Hour, "in 1 h"},
		{"HoursAgo", -5*time.Hour - 59*time.Minute, "5 h ago"},
		{"UpTo48Hours", 47*time.Hour + 59*time.Minute, "in 47 h"},
		{"TwoDays", 48 * time.Hour, "in 2 d"},
		{"DaysAgo", -400 * 24 * time.Hour, "400 d ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RelativeTime(now.Add(tt.offset), now); got != tt.want {
				t.Errorf("RelativeTime(now%+v, now) = %q, want %q", tt.offset, got, tt.want)
			}
		})
	}
	t.Run("Zero", func(t *testing.T) {
		if got := RelativeTime(time.Time{}, now); got != "" {
			t.Errorf("RelativeTime(zero, now) = %q, want %q", got, "")
		}
	})
	t.Run("IgnoresZone", func(t *testing.T) {
		berlin := time.FixedZone("CET", 3600)
		if got := RelativeTime(now.Add(90*time.Second).In(berlin), now); got != "in 1 min" {
			t.Errorf("RelativeTime(now+90s in CET, now) = %q, want %q", got, "in 1 min")
		}
	})
}

func TestCountdown(t *testing.T) {
	tests := []struct {
		name    string
		expires time.Time
		want    string
	}{
		{"Ahead", now.Add(12500 * time.Millisecond), "in 12 s"},
		{"UnderASecond", now.Add(time.Millisecond), "now"},
		{"AtNow", now, "expired"},
		{"Past", now.Add(-time.Hour), "expired"},
		{"Zero", time.Time{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Countdown(tt.expires, now); got != tt.want {
				t.Errorf("Countdown(%v, now) = %q, want %q", tt.expires, got, tt.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ms"},
		{250 * time.Millisecond, "250 ms"},
		{time.Second, "1 s"},
		{1500 * time.Millisecond, "1.5 s"},
		{30 * time.Second, "30 s"},
		{2*time.Minute + 30*time.Second, "2 min 30 s"},
		{time.Hour, "1 h"},
		{time.Hour + 5*time.Minute + 7*time.Second, "1 h 5 min"},
		{72 * time.Hour, "3 d"},
		{-1500 * time.Millisecond, "-1.5 s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestLeaseURL(t *testing.T) {
	tests := []struct{ name, want string }{
		{"billing-nightly", "/leases/billing-nightly"},
		{"jobs:nightly.v2", "/leases/jobs:nightly.v2"},
		{"a/b?c#d", "/leases/a%2Fb%3Fc%23d"},
		{`<script>alert(1)</script>`, "/leases/%3Cscript%3Ealert%281%29%3C%2Fscript%3E"},
		{`javascript:alert(1)`, "/leases/javascript:alert%281%29"},
		{`" onmouseover="x`, "/leases/%22%20onmouseover=%22x"},
	}
	for _, tt := range tests {
		if got := string(LeaseURL(tt.name)); got != tt.want {
			t.Errorf("LeaseURL(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPageURL(t *testing.T) {
	tests := []struct {
		kv   []string
		want string
	}{
		{nil, "/"},
		{[]string{"prefix", ""}, "/"},
		{[]string{"prefix", "a b", "cursor", "x:y/z=&"}, "/?prefix=a+b&cursor=x%3Ay%2Fz%3D%26"},
		{[]string{"prefix", "", "cursor", "c"}, "/?cursor=c"},
	}
	for _, tt := range tests {
		if got := string(pageURL("/", tt.kv...)); got != tt.want {
			t.Errorf("pageURL(%q, %q) = %q, want %q", "/", tt.kv, got, tt.want)
		}
	}
}

func TestCompactJSON(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"", ""},
		{"null", ""},
		{" {} ", ""},
		{`{ "addr": "10.0.0.7:9000",  "n": [1, 2] }`, `{"addr":"10.0.0.7:9000","n":[1,2]}`},
		{`{"broken":`, `{"broken":`},
	}
	for _, tt := range tests {
		if got := compactJSON(json.RawMessage(tt.raw)); got != tt.want {
			t.Errorf("compactJSON(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.5 KiB"}, {1 << 20, "1.0 MiB"}, {5 << 30, "5.0 GiB"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"worker-1", 8, "worker-1"}, {"worker-1", 5, "work…"}, {"äöüäöü", 4, "äöü…"}, {"x", 0, ""},
	}
	for _, tt := range tests {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestIsFragment(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   bool
	}{{"1", true}, {"", false}, {"0", false}} {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set(FragmentHeader, tt.header)
		}
		if got := IsFragment(r); got != tt.want {
			t.Errorf("IsFragment(%s: %q) = %v, want %v", FragmentHeader, tt.header, got, tt.want)
		}
	}
}

func TestNameWrapsAfterSeparators(t *testing.T) {
	tests := []struct{ in, want string }{
		{"orders-db", "orders-<wbr>db"},
		{"worker-3@host-c.example", "worker-<wbr>3@<wbr>host-<wbr>c.<wbr>example"},
		{"plain", "plain"},
		{"trailing-", "trailing-"},
		{"a-<b>&", "a-<wbr>&lt;b&gt;&amp;"},
		{"", ""},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := name(tt.in).Render(context.Background(), &b); err != nil {
			t.Fatalf("name(%q) = %v", tt.in, err)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("name(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStaleToken(t *testing.T) {
	for _, tt := range []struct {
		behind int
		want   string
	}{{-1, "1772366340000000"}, {0, "1772366340000000"}, {1, "1 grant behind"}, {4, "4 grants behind"}} {
		if got := staleToken(Rejection{PresentedToken: 1772366340000000, GrantsBehind: tt.behind}); got != tt.want {
			t.Errorf("staleToken(%d behind) = %q, want %q", tt.behind, got, tt.want)
		}
	}
}
