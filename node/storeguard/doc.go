// Package storeguard keeps the node agent from taking work its store
// cannot hold. It watches the free space of the filesystem under the
// agent's bbolt file; below Config.MinFree the node is full:
//
//   - the agent creates no record for a VMI new to the node (it warns on
//     the VMI, event NodeStoreFull, and retries) — a record is written
//     before anything is built, and a VMI whose record cannot be kept
//     cannot be re-adopted after a restart;
//   - the heartbeat marks the node kubevirt.io/schedulable=false, so no new
//     launcher pod is scheduled there;
//   - running VMs keep running: their records are rewritten in place
//     (bbolt reuses its free pages), pause, stop and delete go on.
//
// Once the space is back above MinFree the node takes work again.
//
// Status it writes: the Node condition NodevirtStoreFull (True with the
// free and needed bytes while full, False once not), patched on the
// node's status subresource when it changes, as node-problem-detector
// reports its conditions. Assess and ConditionPatch are pure; Guard adds
// statfs, the clock and the API call.
package storeguard
