package postgres

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLinger: a batch's leader waits for the flush in flight, or for enough operations, and never
// when nothing is flushing (a lone operation is not delayed). The store needs no database: linger
// reads only the writer's queue.
func TestLinger(t *testing.T) {
	newStore := func() *Store {
		return &Store{arrived: make(chan struct{}, 1), lingerMax: time.Hour}
	}

	t.Run("NothingFlushing", func(t *testing.T) {
		s := newStore()
		s.pending = []*op{{}}
		s.linger() // with an hour's bound, a wait here would time the test out
	})

	t.Run("UntilTheFlushEnds", func(t *testing.T) {
		s := newStore()
		s.pending = []*op{{}}
		done := s.flushStarted()
		var ended atomic.Bool
		go func() {
			time.Sleep(20 * time.Millisecond)
			ended.Store(true)
			s.flushEnded(done)
		}()
		s.linger()
		if !ended.Load() {
			t.Fatal("the leader went on while the previous batch was still flushing")
		}
		if s.flushing != nil {
			t.Fatal("a flush that ended is still recorded as in flight")
		}
	})

	t.Run("UntilTheBatchIsFull", func(t *testing.T) {
		s := newStore()
		done := s.flushStarted()
		defer s.flushEnded(done)
		go func() {
			for range lingerOps {
				s.pendMu.Lock()
				s.pending = append(s.pending, &op{})
				s.pendMu.Unlock()
				select {
				case s.arrived <- struct{}{}:
				default:
				}
			}
		}()
		s.linger() // returns once lingerOps wait, though the flush goes on
		s.pendMu.Lock()
		n := len(s.pending)
		s.pendMu.Unlock()
		if n < lingerOps {
			t.Fatalf("the leader went on with %d operations waiting, want %d: the flush had not ended", n, lingerOps)
		}
	})
}
