package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// runAll runs every service until ctx ends or one of them returns; then it
// cancels the others and waits for them. A service returning while ctx
// lives is an error (the agent must not half-run).
func runAll(ctx context.Context, services map[string]func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for name, run := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(ctx)
			if err == nil && ctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
			cancel()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
