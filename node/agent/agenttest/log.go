package agenttest

import (
	"slices"
	"sync"
)

// Log is the ordered record of the effects the fakes performed, shared by
// all of them, with injectable failures.
type Log struct {
	mu     sync.Mutex
	calls  []string
	fail   map[string]error
	onCall func(op string)
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{fail: map[string]error{}} }

// FailOn makes every call of op fail with err (nil: succeed again). A
// failed call is logged too.
func (l *Log) FailOn(op string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.fail, op)
		return
	}
	l.fail[op] = err
}

// OnCall sets fn to run when an effect is called, before it is logged or
// performed. fn runs on the caller's goroutine, without the log's lock.
func (l *Log) OnCall(fn func(op string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onCall = fn
}

// Calls returns the effects performed so far, in order.
func (l *Log) Calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// Reset forgets the effects performed so far (failures stay).
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

// call runs the OnCall check, logs op and returns its injected error.
func (l *Log) call(op string) error {
	l.mu.Lock()
	fn := l.onCall
	l.mu.Unlock()
	if fn != nil {
		fn(op)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, op)
	return l.fail[op]
}
