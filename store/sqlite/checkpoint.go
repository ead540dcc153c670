package sqlite

import (
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// restartFrames is the WAL size, in frames (pages), from which the writer is asked to let the
// WAL start over (see checkpointer.restart).
const restartFrames = 1024

// checkpointer copies the WAL into the database file in the background (PASSIVE: it never
// waits for, nor blocks, the writer or a reader), so commits only append to the WAL and sync
// it. SQLite's own automatic checkpoint runs inside the commit that crosses its threshold and
// adds the copy of the whole WAL and a sync of the database file to that commit's latency.
//
// The WAL starts over from its beginning only at a write transaction that began when all of it
// had been copied, which under a steady load a checkpoint from another connection never sees
// (the writer has always begun its next batch meanwhile). So when the WAL has grown past
// restartFrames and a background pass copied all it saw, restart is set, and the writer, between
// two batches, copies the few frames committed since (see Store.write): the bulk of the copy
// stays off the writer.
type checkpointer struct {
	// mu is held by each checkpoint, this one's and the writer's after a failed write: two at
	// once, one finds the other's and gives up busy (a failed write's would leave the WAL whole).
	mu      sync.Mutex
	db      *sql.DB
	dirty   atomic.Bool // a commit since the last checkpoint
	restart atomic.Bool // the writer should finish the checkpoint between two batches
	stop    chan struct{}
	stopped sync.Once
	done    sync.WaitGroup
	log     *slog.Logger
	runs    atomic.Int64 // checkpoints run (tests)
}

func startCheckpointer(db *sql.DB, every time.Duration, log *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, stop: make(chan struct{}), log: log}
	c.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				if c.dirty.Swap(false) {
					c.run()
				}
			}
		}
	})
	return c
}

// wrote tells the checkpointer that a batch committed.
func (c *checkpointer) wrote() { c.dirty.Store(true) }

func (c *checkpointer) run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var busy, frames, done int
	if err := c.db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done); err != nil {
		// A full disk or an I/O error: the WAL keeps what was committed; try again later.
		c.dirty.Store(true)
		c.log.Warn("checkpoint the WAL", "err", err)
		return
	}
	c.runs.Add(1)
	if done < frames {
		c.dirty.Store(true) // readers held some frames: copy the rest next time
		return
	}
	if frames >= restartFrames {
		c.restart.Store(true)
	}
}

// finish is the writer's part, between two batches, holding the writer lock: when asked, it
// copies what was committed since the last background pass, so that the next batch begins on a
// WAL copied whole and starts it over.
func (c *checkpointer) finish(w *sql.DB) {
	if !c.restart.Swap(false) {
		return
	}
	var busy, frames, done int
	if err := w.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done); err != nil {
		c.log.Warn("checkpoint the WAL from the writer", "err", err)
	}
}

// close stops the checkpointer; the last connection to close checkpoints what is left. It is
// safe to call more than once.
func (c *checkpointer) close() error {
	c.stopped.Do(func() { close(c.stop) })
	c.done.Wait()
	return c.db.Close()
}
