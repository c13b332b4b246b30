package reconcile

import "time"

// Option configures a Loop.
type Option func(*options)

type options struct {
	keyAttr string
	observe func(took time.Duration, err error)
}

// WithKeyAttr names the log attribute that carries the key (default "key"),
// e.g. "uid" for a loop keyed by object UID.
func WithKeyAttr(name string) Option {
	return func(o *options) { o.keyAttr = name }
}

// WithObserver calls observe after every sync with its duration and
// result, for a process that records sync latency in metrics of its own
// (alongside or instead of the Loop's Metrics). It runs on the worker
// goroutine and must not block.
func WithObserver(observe func(took time.Duration, err error)) Option {
	return func(o *options) { o.observe = observe }
}
