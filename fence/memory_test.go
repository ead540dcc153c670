package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/fence"
)

func TestMemoryAdvance(t *testing.T) {
	type step struct {
		token   int64
		want    int64
		wantErr error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"OK/FirstTokenSetsMark", []step{{token: 7, want: 7}}},
		{"OK/ZeroToken", []step{{token: 0, want: 0}, {token: 0, want: 0}}},
		{"OK/EqualToken", []step{{token: 7, want: 7}, {token: 7, want: 7}}},
		{"OK/HigherToken", []step{{token: 7, want: 7}, {token: 8, want: 8}}},
		{"ErrStale", []step{{token: 7, want: 7}, {token: 6, want: 7, wantErr: &fence.StaleTokenError{Resource: "k", PresentedToken: 6, CurrentFence: 7}}, {token: 7, want: 7}}},
		{"ErrInvalid", []step{{token: -1, wantErr: fence.ErrInvalidToken}, {token: fence.MaxToken + 1, wantErr: fence.ErrInvalidToken}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m fence.Memory
			for _, s := range tt.steps {
				got, err := m.Advance(context.Background(), "k", s.token)
				call := fmt.Sprintf("Advance(k, %d)", s.token)
				checkErr(t, call, err, s.wantErr)
				if got != s.want {
					t.Errorf("%s = %d, want %d", call, got, s.want)
				}
			}
		})
	}
}

func TestMemoryCanceled(t *testing.T) {
	var m fence.Memory
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Advance(ctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Advance with canceled ctx = %v, want context.Canceled", err)
	}
	if _, ok := m.Mark("k"); ok {
		t.Errorf("Mark(k) exists after a canceled Advance")
	}
}

// TestMemoryConcurrent runs under -race: many goroutines advance a few keys
// with random tokens; every answer is consistent and each key ends at the
// highest token offered for it.
func TestMemoryConcurrent(t *testing.T) {
	var m fence.Memory
	keys := []string{"a", "b", "c"}
	const goroutines, perG = 16, 500
	var wg sync.WaitGroup
	maxes := make([]map[string]int64, goroutines)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		maxes[g] = map[string]int64{}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			last := map[string]int64{}
			for range perG {
				key := keys[r.IntN(len(keys))]
				token := r.Int64N(10_000)
				maxes[g][key] = max(maxes[g][key], token)
				cur, err := m.Advance(context.Background(), key, token)
				var stale *fence.StaleTokenError
				switch {
				case err == nil && cur != token:
					errs <- fmt.Errorf("Advance(%s, %d) = %d, nil; want the token", key, token, cur)
					return
				case errors.As(err, &stale) && (cur <= token || stale.CurrentFence != cur):
					errs <- fmt.Errorf("Advance(%s, %d) = %d, %v; want a higher current", key, token, cur, err)
					return
				case err != nil && stale == nil:
					errs <- fmt.Errorf("Advance(%s, %d): %v", key, token, err)
					return
				}
				if cur < last[key] {
					errs <- fmt.Errorf("key %s: mark seen falling from %d to %d", key, last[key], cur)
					return
				}
				last[key] = cur
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := map[string]int64{}
	for _, mx := range maxes {
		for k, v := range mx {
			want[k] = max(want[k], v)
		}
	}
	got := map[string]int64{}
	for _, k := range keys {
		if v, ok := m.Mark(k); ok {
			got[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final marks (-want +got):\n%s", diff)
	}
}
