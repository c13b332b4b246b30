// Command probe is the test tool baked into the nodevirt.local/probe image.
// It is a static binary because Debian's busybox wget crashes in pods.
//
//	probe serve [-addr :8080]   HTTP server; GET / answers "probe <hostname>"
//	probe get URL               prints the body of GET URL; exit 1 on failure
//	probe dev PATH              checks that PATH is a device node this
//	                            process can open read-write
//	probe kube                  asks the API server (kubernetes Service, pod's
//	                            service-account token) who it is
package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve|get|dev|kube ...")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "get":
		err = get(ctx, os.Args[2:])
	case "dev":
		err = dev(os.Args[2:])
	case "kube":
		err = kube(ctx)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}
