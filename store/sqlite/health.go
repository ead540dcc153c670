package sqlite

import (
	"log/slog"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// failLogEvery is the least time between two log lines about failing writes.
const failLogEvery = 10 * time.Second

// writeHealth follows writes that the database refuses (see writeFailure). The store is not
// ready from such a failure until a write succeeds. The log tells of an episode of failures
// (which on a nearly full disk may alternate with writes that fit) once at ERROR when it starts,
// then at most once per failLogEvery: a count while writes fail, and its end once they work.
type writeHealth struct {
	mu      sync.Mutex
	failing bool      // the last write failed: not ready
	first   error     // the failure that made it so
	since   time.Time // and when
	open    bool      // an episode is being told in the log
	start   time.Time // when it started
	total   int       // its failures
	unsaid  int       // its failures not counted in a log line yet
	said    time.Time // when its last line was written
}

// fail records a failed write at now. It reports whether the WAL should be checkpointed: with
// each line the log writes, so at most once per failLogEvery.
func (h *writeHealth) fail(now time.Time, err error, log *slog.Logger) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		h.failing, h.first, h.since = true, err, now
	}
	if !h.open {
		h.open, h.start, h.total, h.unsaid, h.said = true, now, 1, 0, now
		log.Error("database writes fail: answering 503 and not ready until one succeeds", "err", err)
		return true
	}
	h.total++
	h.unsaid++
	if now.Sub(h.said) < failLogEvery {
		return false
	}
	log.Warn("database writes still fail", "failures", h.unsaid, "since", h.start, "err", err)
	h.unsaid, h.said = 0, now
	return true
}

// ok records a committed write at now: the store is ready again, and the episode ends in the
// log once failLogEvery has passed since its last line.
func (h *writeHealth) ok(now time.Time, log *slog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing, h.first = false, nil
	if !h.open || now.Sub(h.said) < failLogEvery {
		return
	}
	log.Info("database writes succeed again", "failures", h.total, "after", now.Sub(h.start))
	h.open = false
}

// err is unavailable while the last write failed, nil otherwise.
func (h *writeHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return nil
	}
	return lease.Errorf(lease.CodeUnavailable, "database writes fail since %s: %v", h.since.UTC().Format(time.RFC3339), h.first)
}
