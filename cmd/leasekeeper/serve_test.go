package main

import (
	"io"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
)

func TestParseServe(t *testing.T) {
	def := lease.DefaultLimits()
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		addr, db  string
		minTTL    time.Duration
		maxTTL    time.Duration
		retention time.Duration
	}{
		{"OK/Defaults", nil, nil, "127.0.0.1:8080", "./leasekeeper.db", def.MinTTL, def.MaxTTL, 7 * 24 * time.Hour},
		{"OK/Env", map[string]string{"LEASEKEEPER_ADDR": ":9000", "LEASEKEEPER_DB": "/data/lk.db", "LEASEKEEPER_MIN_TTL": "2s",
			"LEASEKEEPER_MAX_TTL": "10m", "LEASEKEEPER_RETENTION": "1h"}, nil, ":9000", "/data/lk.db", 2 * time.Second, 10 * time.Minute, time.Hour},
		{"OK/FlagsWin", map[string]string{"LEASEKEEPER_ADDR": ":9000", "LEASEKEEPER_DB": "/data/lk.db", "LEASEKEEPER_MAX_TTL": "10m"},
			[]string{"--addr", "127.0.0.1:1", "--db", "/tmp/x.db", "--max-ttl", "2h"}, "127.0.0.1:1", "/tmp/x.db", def.MinTTL, 2 * time.Hour, 7 * 24 * time.Hour},
		{"OK/FlagWinsOverOneEnv", map[string]string{"LEASEKEEPER_ADDR": ":9000", "LEASEKEEPER_DB": "/data/lk.db"},
			[]string{"-db=/tmp/y.db"}, ":9000", "/tmp/y.db", def.MinTTL, def.MaxTTL, 7 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if err != nil {
				t.Fatalf("parseServe(%q) = %v", tt.args, err)
			}
			type got struct {
				Addr, DB                  string
				MinTTL, MaxTTL, Retention time.Duration
			}
			want := got{tt.addr, tt.db, tt.minTTL, tt.maxTTL, tt.retention}
			if diff := cmp.Diff(want, got{c.addr, c.db, c.limits.MinTTL, c.limits.MaxTTL, c.retention.Age}); diff != "" {
				t.Errorf("parseServe(%q) with env %v mismatch (-want +got):\n%s", tt.args, tt.env, diff)
			}
		})
	}
}

func TestParseServeTimeouts(t *testing.T) {
	for _, tt := range []struct {
		env       map[string]string
		args      []string
		body, out time.Duration
	}{
		{nil, nil, 30 * time.Second, 30 * time.Second},
		{map[string]string{"LEASEKEEPER_BODY_TIMEOUT": "5s", "LEASEKEEPER_WRITE_TIMEOUT": "6s"}, nil, 5 * time.Second, 6 * time.Second},
		{map[string]string{"LEASEKEEPER_BODY_TIMEOUT": "5s", "LEASEKEEPER_WRITE_TIMEOUT": "6s"}, []string{"--body-timeout", "2s", "--write-timeout", "3s"},
			2 * time.Second, 3 * time.Second},
	} {
		c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		if err != nil || c.bodyTimeout != tt.body || c.writeTimeout != tt.out {
			t.Errorf("parseServe(%q) with env %v = body timeout %v, write timeout %v, %v; want %v, %v", tt.args, tt.env, c.bodyTimeout, c.writeTimeout, err, tt.body, tt.out)
		}
	}
}

func TestParseServeTrustedProxy(t *testing.T) {
	env := map[string]string{"LEASEKEEPER_TRUSTED_PROXY": "192.0.2.1"}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, ""},
		{env, nil, "192.0.2.1/32"},
		{env, []string{"--trusted-proxy", "10.0.0.0/8,::ffff:10.1.2.3", "--trusted-proxy=fd00::/8"}, "10.0.0.0/8,10.1.2.3/32,fd00::/8"},
	} {
		c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		got := (&proxyList{c.proxies}).String()
		if err != nil || got != tt.want {
			t.Errorf("parseServe(%q) with env %v = trusted proxies %q, %v; want %q", tt.args, tt.env, got, err, tt.want)
		}
	}
}

func TestParseServeResourceQuota(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want lease.Quota
	}{
		{nil, nil, lease.Quota{Resources: 1000, Bytes: 64 << 20}},
		{map[string]string{"LEASEKEEPER_MAX_RESOURCES_PER_KEY": "5", "LEASEKEEPER_MAX_RESOURCE_BYTES_PER_KEY": "4096"}, nil,
			lease.Quota{Resources: 5, Bytes: 4096}},
		{map[string]string{"LEASEKEEPER_MAX_RESOURCES_PER_KEY": "5"}, []string{"--max-resources-per-key", "0", "--max-resource-bytes-per-key=7"},
			lease.Quota{Resources: 0, Bytes: 7}},
	} {
		c, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		if err != nil || c.auth.ResourceQuota != tt.want {
			t.Errorf("parseServe(%q) with env %v = quota %+v, %v; want %+v", tt.args, tt.env, c.auth.ResourceQuota, err, tt.want)
		}
	}
	for _, bad := range []map[string]string{{"LEASEKEEPER_MAX_RESOURCES_PER_KEY": "many"}, {"LEASEKEEPER_MAX_RESOURCE_BYTES_PER_KEY": "-1"}} {
		if _, err := parseServe(nil, func(k string) string { return bad[k] }, io.Discard, io.Discard); err == nil {
			t.Errorf("parseServe() with env %v = nil error, want the value refused", bad)
		}
	}
}

// TestSecretsIgnored checks that the files serve writes beside a database are ignored by git
// and kept out of container builds: one `git add -A` must not commit the admin key.
func TestSecretsIgnored(t *testing.T) {
	for _, f := range []string{"../../.gitignore", "../../.dockerignore"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"leasekeeper.db.admin-key", "leasekeeper.db.secret"} {
			ignored := false
			for _, line := range strings.Split(string(b), "\n") {
				if ok, _ := path.Match(strings.TrimSpace(line), name); ok && !strings.HasPrefix(line, "#") {
					ignored = true
				}
			}
			if !ignored {
				t.Errorf("%s does not ignore %s", f, name)
			}
		}
	}
}

func TestParseServeSignIn(t *testing.T) {
	c, err := parseServe(nil, func(string) string { return "" }, io.Discard, io.Discard)
	if err != nil || c.auth.SignInRate != 1 || c.auth.SignInBurst != 10 || c.auth.MaxDashboardSessionsPerKey != 10 {
		t.Errorf("parseServe() = sign-in rate %v burst %d, %d dashboard sessions, %v; want 1, 10, 10", c.auth.SignInRate, c.auth.SignInBurst, c.auth.MaxDashboardSessionsPerKey, err)
	}
}

func TestParseServeCORS(t *testing.T) {
	for _, tt := range []struct {
		env  string
		args []string
		want []string
	}{
		{"", nil, nil},
		{"https://a.example, http://localhost:3000", nil, []string{"https://a.example", "http://localhost:3000"}},
		{"", []string{"--cors-origin", "https://A.example", "--cors-origin=https://b.example,https://c.example:8443"},
			[]string{"https://a.example", "https://b.example", "https://c.example:8443"}},
		{"https://env.example", []string{"--cors-origin", "https://flag.example"}, []string{"https://flag.example"}},
	} {
		c, err := parseServe(tt.args, func(k string) string {
			if k == "LEASEKEEPER_CORS_ORIGIN" {
				return tt.env
			}
			return ""
		}, io.Discard, io.Discard)
		if err != nil || !cmp.Equal(c.corsOrigins, tt.want) {
			t.Errorf("parseServe(%q) with LEASEKEEPER_CORS_ORIGIN=%q = CORS origins %q, %v; want %q", tt.args, tt.env, c.corsOrigins, err, tt.want)
		}
	}
}

func TestParseServeErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"ErrUsage/EnvMaxBelowFlagMin", map[string]string{"LEASEKEEPER_MAX_TTL": "2s"}, []string{"--min-ttl", "3s"}},
		{"ErrUsage/NegativeMaxWait", nil, []string{"--max-wait", "-1s"}},
		{"ErrUsage/NegativeLockDelay", nil, []string{"--max-lock-delay", "-1s"}},
		{"ErrUsage/EnvLogFormat", map[string]string{"LEASEKEEPER_LOG_FORMAT": "xml"}, nil},
		{"ErrUsage/EnvLogLevel", map[string]string{"LEASEKEEPER_LOG_LEVEL": "chatty"}, nil},
		{"ErrUsage/ZeroBodyTimeout", nil, []string{"--body-timeout", "0s"}},
		{"ErrUsage/ZeroWriteTimeout", nil, []string{"--write-timeout", "0s"}},
		{"ErrUsage/EnvWriteTimeout", map[string]string{"LEASEKEEPER_WRITE_TIMEOUT": "soon"}, nil},
		{"ErrUsage/NegativeSignInRate", nil, []string{"--signin-rate", "-1"}},
		{"ErrUsage/TrustedProxyNotAnAddress", nil, []string{"--trusted-proxy", "proxy.example"}},
		{"ErrUsage/EnvTrustedProxy", map[string]string{"LEASEKEEPER_TRUSTED_PROXY": "10.0.0.0/33"}, nil},
		{"ErrUsage/NegativeDashboardSessions", nil, []string{"--max-dashboard-sessions-per-key", "-1"}},
		{"ErrUsage/AuthOffOnEveryAddress", nil, []string{"--auth", "off", "--addr", "0.0.0.0:8080"}},
		{"ErrUsage/AuthOffOnAnAddressOfThisHost", nil, []string{"--auth", "off", "--addr", ":8080"}},
		{"ErrUsage/EnvAuthOffNotLoopback", map[string]string{"LEASEKEEPER_AUTH": "off", "LEASEKEEPER_ADDR": "10.1.2.3:80"}, nil},
		{"ErrUsage/AuthMaybe", nil, []string{"--auth", "maybe"}},
		{"ErrUsage/NegativeKeyRate", nil, []string{"--key-rate", "-1"}},
		{"ErrUsage/PostgresWithoutSecretFile", map[string]string{"LEASEKEEPER_ADMIN_KEY": testAdminKey}, []string{"--db", "postgres://db.example/lk"}},
		{"ErrUsage/CORSWildcard", nil, []string{"--cors-origin", "*"}},
		{"ErrUsage/CORSPath", nil, []string{"--cors-origin", "https://a.example/app"}},
		{"ErrUsage/EnvCORSNoScheme", map[string]string{"LEASEKEEPER_CORS_ORIGIN": "a.example"}, []string{"--cors-origin", "https://b.example"}},
		{"ErrUsage/PostgresWithoutAdminKey", nil, []string{"--db", "postgresql://db.example/lk", "--secret-file", "/tmp/s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseServe(tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if exitCode(err) != 2 || err == nil {
				t.Errorf("parseServe(%q) with env %v = %v (exit %d), want exit 2", tt.args, tt.env, err, exitCode(err))
			}
		})
	}
}

func TestRedactDB(t *testing.T) {
	for _, tt := range []struct{ db, want string }{
		{"./leasekeeper.db", "./leasekeeper.db"},
		{"postgres://lk:hunter2@db.example:5432/lk?sslmode=require", "postgres://lk:xxxxx@db.example:5432/lk?sslmode=require"},
		{"postgresql://db.example/lk?password=hunter2&sslmode=require", "postgresql://db.example/lk?password=xxxxx&sslmode=require"},
	} {
		if got := redactDB(tt.db); got != tt.want {
			t.Errorf("redactDB(%q) = %q, want %q", tt.db, got, tt.want)
		}
	}
}

func TestParseServeDBMaxConns(t *testing.T) {
	for _, tt := range []struct {
		env  string
		args []string
		want int
		ok   bool
	}{
		{"", nil, 0, true},
		{"24", nil, 24, true},
		{"24", []string{"--db-max-conns", "8"}, 8, true},
		{"", []string{"--db-max-conns", "-1"}, 0, false},
		{"", []string{"--db-max-conns", "100001"}, 0, false},
		{"many", nil, 0, false},
	} {
		c, err := parseServe(tt.args, func(k string) string {
			if k == "LEASEKEEPER_DB_MAX_CONNS" {
				return tt.env
			}
			return ""
		}, io.Discard, io.Discard)
		if (err == nil) != tt.ok || err == nil && c.dbMaxConns != tt.want {
			t.Errorf("parseServe(%q) with LEASEKEEPER_DB_MAX_CONNS=%q = %d, %v; want %d, ok %v", tt.args, tt.env, c.dbMaxConns, err, tt.want, tt.ok)
		}
	}
}
