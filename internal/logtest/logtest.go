// Package logtest collects what a *slog.Logger writes, for tests of what is logged at which
// level.
package logtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Sink receives JSON log lines; it is safe for concurrent use.
type Sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// Logger returns a logger that writes every record, debug and up, to s.
func (s *Sink) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Records returns the records logged at level ("DEBUG", "INFO", "WARN", "ERROR"; "" for all),
// oldest first, each as its JSON object.
func (s *Sink) Records(t testing.TB, level string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if level == "" || r["level"] == level {
			out = append(out, r)
		}
	}
	return out
}
