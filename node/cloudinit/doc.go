// Package cloudinit builds the NoCloud data source of a VMI: an ISO 9660
// image labelled "cidata" holding user-data, meta-data and, when given,
// network-config (the files cloud-init's NoCloud source and the nodevirt
// test guest read).
//
// NewConfig gathers the data from a cloudInitNoCloud volume (inline
// userData, userDataBase64, or the keys of its secret volume); Write and
// WriteFile produce the image. The agent writes it to the launcher pod's
// private/cloudinit/<volume>.iso (launchspec.Paths.CloudInitISO) owned by
// the QEMU user, before it sends the launch spec.
//
// meta-data is written as JSON (a subset of YAML), so a hostname can never
// inject YAML keys: {"instance-id": <VMI UID>, "local-hostname": <hostname
// or VMI name>}.
//
// Functions here hold no state and are safe for concurrent use.
package cloudinit
