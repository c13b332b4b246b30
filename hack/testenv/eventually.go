package testenv

import (
	"testing"
	"time"
)

// Condition is what Eventually polls: a func() bool, a func() error that
// returns nil once the condition holds, or a func() (bool, error). The
// last error, if any, is reported when the deadline passes; it does not
// stop the polling.
type Condition interface {
	func() bool | func() error | func() (bool, error)
}

// Eventually calls cond until it holds and returns how long that took, or
// fails the test with what (and cond's last error) once timeout has
// passed. It polls with a backoff from 5 ms up to timeout/300, kept
// between 5 ms and 1 s: fast for short waits, light on the API server for
// long ones.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C) time.Duration {
	t.Helper()
	check := condFunc(cond)
	start := time.Now()
	deadline := start.Add(timeout)
	interval, maxInterval := 5*time.Millisecond, min(max(timeout/300, 5*time.Millisecond), time.Second)
	for {
		ok, err := check()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, err)
			}
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
}

// condFunc turns any Condition into a func() (bool, error).
func condFunc[C Condition](cond C) func() (bool, error) {
	switch f := any(cond).(type) {
	case func() bool:
		return func() (bool, error) { return f(), nil }
	case func() error:
		return func() (bool, error) { err := f(); return err == nil, err }
	default: // func() (bool, error): the type set has no other member
		return any(cond).(func() (bool, error))
	}
}
