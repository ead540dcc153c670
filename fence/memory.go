package fence

import (
	"context"
	"fmt"
	"sync"
)

// HighWater keeps, per key, the highest token accepted so far.
type HighWater interface {
	// Advance atomically compares token with key's mark: when token is at
	// least the mark (or key has none), it raises the mark to token and
	// returns token; otherwise it leaves the mark alone and returns the mark
	// with a *StaleTokenError. Any other error means the check could not be
	// made, and the write must not proceed.
	Advance(ctx context.Context, key string, token int64) (current int64, err error)
}

var _ HighWater = (*Memory)(nil)

// Memory is a HighWater kept in process memory, safe for concurrent use. Its
// zero value is ready to use. Marks are lost when the process exits, and it
// keeps one entry per key it has seen, forever: it suits a fixed, modest set
// of keys. A resource that must survive restarts needs a durable mark, such
// as a Table row.
type Memory struct {
	mu    sync.Mutex
	marks map[string]int64
}

// Advance implements HighWater.
func (m *Memory) Advance(ctx context.Context, key string, token int64) (int64, error) {
	if err := checkToken(token); err != nil {
		return 0, fmt.Errorf("fence %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("fence %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.marks[key]; ok && token < cur {
		return cur, &StaleTokenError{Resource: key, PresentedToken: token, CurrentFence: cur}
	}
	if m.marks == nil {
		m.marks = make(map[string]int64)
	}
	m.marks[key] = token
	return token, nil
}

// Mark returns key's mark and whether it has one.
func (m *Memory) Mark(key string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.marks[key]
	return cur, ok
}
