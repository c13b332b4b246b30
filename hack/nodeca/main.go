// Command nodeca creates the nodevirt CA for the node API's mutual TLS and
// prints it as the Secret nodevirt-ca (namespace nodevirt) on stdout, for a
// deploy-time `kubectl apply`. The agent mounts the Secret (--api-ca-dir)
// and issues its own serving certificate from it; cluster-side clients get
// client certificates from the same CA.
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodevirt/nodevirt/node/api"
)

func main() {
	ttl := flag.Duration("ttl", 10*365*24*time.Hour, "CA validity")
	flag.Parse()
	_, cert, key, err := api.NewCA("nodevirt-ca", *ttl)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeca:", err)
		os.Exit(1)
	}
	b64 := base64.StdEncoding.EncodeToString
	fmt.Printf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/part-of: nodevirt
type: Opaque
data:
  %s: %s
  %s: %s
`, api.CASecret, api.CANamespace, api.CACertKey, b64(cert), api.CAKeyKey, b64(key))
}
