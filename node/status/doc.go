// Package status derives the node agent's part of a VMI's status from what
// the agent observed on the node. It is pure: no cluster, QEMU or clock;
// the caller passes the time in Facts.Now.
//
// The agent owns (docs/status-ownership.md and v1.StatusOwnership, one
// writer per field) status.phase from
// Scheduled on, status.phaseTransitionTimestamps for those phases, the
// conditions Ready, Paused, AgentConnected and LiveMigratable,
// status.interfaces, status.guestOSInfo and status.accelerator. Derive
// copies everything else from the current status untouched, so the caller
// can compare old and new and patch only when they differ; the patch
// applies only the agent's fields (v1.StatusApply with v1.ManagerAgent).
//
// Invariants:
//   - A phase only moves along v1.VirtualMachineInstancePhase.CanTransitionTo;
//     a final phase (Succeeded, Failed) never changes again.
//   - Every phase change appends one phaseTransitionTimestamps entry and
//     yields exactly one Event (Started, or Stopped).
//   - Derive is idempotent: Derive(Derive(s, f), f) == Derive(s, f), and
//     condition timestamps only move when a condition's status changes.
//     Times are truncated to seconds, the API's precision, so a status read
//     back from the API server compares equal to the one written.
package status
