package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// sentenceHandler writes the client library's warnings the way a command speaks to the person
// who ran it, one plain sentence a line ("leasekeeper lock: lease renewal failed; retrying:
// … (retry_in 1s)"), not in log format: that is for --verbose. Below Warn it writes nothing.
type sentenceHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	cmd   string
	attrs []slog.Attr
}

func newSentenceHandler(w io.Writer, cmd string) *sentenceHandler {
	return &sentenceHandler{mu: new(sync.Mutex), w: w, cmd: cmd}
}

func (h *sentenceHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *sentenceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "leasekeeper %s: %s", h.cmd, r.Message)
	var cause string
	var details []string
	add := func(a slog.Attr) bool {
		switch {
		case a.Key == "err":
			cause = a.Value.String()
		case a.Key != "name" && a.Value.String() != "": // the command line named the lease
			details = append(details, a.Key+" "+a.Value.String())
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if cause != "" {
		b.WriteString(": " + cause)
	}
	if len(details) > 0 {
		b.WriteString(" (" + strings.Join(details, ", ") + ")")
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *sentenceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], as...)
	return &h2
}

// WithGroup keeps the handler as it is: a sentence has no groups.
func (h *sentenceHandler) WithGroup(string) slog.Handler { return h }

// cliLogger is the client library's logger for command cmd: plain sentences of its warnings,
// or with --verbose, everything from debug up in log format.
func cliLogger(w io.Writer, cmd string, verbose bool) *slog.Logger {
	if verbose {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(newSentenceHandler(w, cmd))
}
