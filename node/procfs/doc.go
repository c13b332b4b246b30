// Package procfs parses the kernel's per-process stat file,
// /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat for a thread), as
// proc(5) lays it out. It is the one parser of that line in the tree: the
// agent's process identity (a pid and its start time), the vCPU metrics
// and the benchmark's CPU meter all read it through ParseStat.
//
// The command name (field 2) is in parentheses and may itself hold spaces
// and parentheses, so it runs from the first '(' to the last ')', and the
// numbered fields are counted from there.
//
// It writes no status fields and keeps no state.
package procfs
