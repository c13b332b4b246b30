// Package profiling is the --profiling flag's handler, shared by the
// nodevirt binaries that serve an HTTP endpoint: Go's profiles (CPU, heap,
// goroutines, execution trace) under /debug/pprof/, as Kubernetes
// components serve them. It owns no state and writes no status.
package profiling
