// Package podfs names the files of a launcher pod as the node agent sees them
// from the host, through the kubelet's pod directory:
//
//	<kubeletRoot>/pods/<podUID>/volumes/
//	├── kubernetes.io~empty-dir/
//	│   ├── sockets/            launcher.sock qmp.sock qga.sock serial.sock vnc.sock qemu-running.json qemu-exit.json
//	│   └── private/            kernel/ overlays/ empty/ cloudinit/<volume>.iso
//	└── kubernetes.io~secret/
//	    └── <volume>-secret/    cloud-init secretRef data
//
// The layout is the one docs/launcher-pod.md fixes for the controller, the
// agent and the launcher. Everything here is pure path arithmetic: nothing
// touches the file system, so a Pod is safe to copy and use concurrently.
package podfs
