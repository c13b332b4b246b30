package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEach(t *testing.T) {
	items := make([]int, 1000)
	for i := range items {
		items[i] = i
	}
	var sum atomic.Int64
	if err := forEach(context.Background(), items, 8, func(i int) error {
		sum.Add(int64(i))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := sum.Load(), int64(999*1000/2); got != want {
		t.Errorf("sum %d, want %d: not every item was processed once", got, want)
	}

	boom := errors.New("boom")
	var calls atomic.Int64
	err := forEach(context.Background(), items, 4, func(i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("forEach = %v, want %v", err, boom)
	}
	if calls.Load() == int64(len(items)) {
		t.Errorf("all %d items processed after an error", len(items))
	}
}
