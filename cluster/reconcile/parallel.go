package reconcile

import (
	"errors"
	"sync"
)

// Parallel runs f(0..n-1), at most limit at a time, and joins their errors.
// Controllers use it for the API calls of one sync (creates, deletes).
func Parallel(n, limit int, f func(i int) error) error {
	if n == 0 {
		return nil
	}
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
