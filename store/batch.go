package store

import (
	"context"
	"time"
)

// Batch is one transaction of a backend's writer, as told to its batch-trace hook
// (sqlite.Options.OnBatchTrace; PostgreSQL's writer is to call the same) after it ends.
type Batch struct {
	// Ops are the contexts of the operations the batch held, in order; each carries the trace
	// of the request that made it, if any.
	Ops []context.Context
	// Began is when the transaction began, Took its time from BEGIN to the end of COMMIT.
	Began time.Time
	Took  time.Duration
	// Commit is the time of COMMIT alone: writing the log and waiting for its fsync.
	Commit time.Duration
	// Committed is false when the transaction failed and its operations with it.
	Committed bool
}
