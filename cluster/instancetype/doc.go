// Package instancetype gives VirtualMachines KubeVirt's instancetypes and
// preferences (instancetype.kubevirt.io/v1beta1): it owns the expansion of
// a VM's template with its instancetype and preference into the VMI spec,
// and the ControllerRevisions that pin what a VM was expanded from.
//
// # Expansion (pure: Expand)
//
// The instancetype decides: cpu.guest becomes spec.domain.cpu (all sockets
// by default; cores, threads or a spread per the preference's
// preferredCPUTopology), memory.guest becomes spec.domain.memory.guest
// (overcommitPercent lowers spec.domain.resources.requests.memory),
// cpu.model, nodeSelector and annotations are copied. A VM template that
// sets any of these itself (domain.cpu sockets/cores/threads, domain.memory,
// cpu or memory resources, a model when the instancetype has one, a node
// selector when the instancetype has one) conflicts: the error names every
// such field in KubeVirt's words, "VM field(s) spec.template.spec.domain.memory
// conflicts with selected instance type", and no VMI is created.
//
// The preference only fills what the template leaves unset: disk, CD-ROM
// and LUN buses, disk cache, interface model (of the interfaces the
// template lists), autoattach flags, machine type, subdomain, termination
// grace period, annotations, features (Hyper-V enlightenment by
// enlightenment), clock offset and timers, the bootloader (EFI before
// BIOS) and an rng device. Its requirements (minimum vCPUs and memory)
// are checked against the instancetype, or the VM without one. A TPM
// preference is accepted and not applied (no vTPM): NotApplied lists it and
// the VM gets a PreferenceNotApplied event when its VMI is created.
//
// # Revisions (Revisions.Store, Revisions.Expand)
//
// The first sync of a VM that names an instancetype or preference captures
// each in a ControllerRevision owned by the VM, named as KubeVirt names it
// (<vm>-<object>-v1beta1-<object uid>-<object generation>, with KubeVirt's
// instancetype.kubevirt.io/object-* labels), and the VM controller records
// it in status.instancetypeRef / status.preferenceRef
// ({name, kind, controllerRevisionRef.name}). VMIs are expanded from the
// revision from then on, so editing an instancetype changes no existing VM;
// a VM picks up the current object once its controllerRevisionRef is
// cleared (or its spec names another object); spec.*.revisionName pins a
// given revision. An instancetype that conflicts with the VM is refused
// before a revision is written.
//
// Status fields written (through the VM controller, the only writer of VM
// status): status.instancetypeRef and status.preferenceRef. Objects
// written: ControllerRevisions in the VM's namespace (garbage collected
// with the VM through their owner reference).
//
// Not supported, refused by the CRD schema with a message naming the
// field: spec.instancetype.inferFromVolume and spec.preference.inferFromVolume
// (inferring needs CDI DataVolumes/DataSources), and the instancetype
// fields nodevirt cannot honour (see cluster/api/instancetype/v1beta1).
//
// Concurrency: Expand is pure; Revisions holds no state and may be used
// from any number of workers.
package instancetype
