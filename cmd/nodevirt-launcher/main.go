// Command nodevirt-launcher runs in a VM's pod (docs/launcher-pod.md):
//
//	nodevirt-launcher run --sockets DIR --private DIR [--qemu PATH]
//	nodevirt-launcher install DEST
//	nodevirt-launcher copy --to DIR SRC=NAME...
//	nodevirt-launcher hold-disk --pid-file FILE
//
// It links no Kubernetes code: its budget is 10 MiB RSS.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodevirt-launcher run|install|copy|hold-disk [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) int{
		"run":       runCmd,
		"install":   installCmd,
		"copy":      copyCmd,
		"hold-disk": holdDiskCmd,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "nodevirt-launcher: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	os.Exit(cmd(os.Args[2:]))
}
