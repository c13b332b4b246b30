// Command nodeca creates the nodevirt CA of the node API's mutual TLS and
// prints it as the Secret nodevirt-ca (namespace nodevirt) on stdout, for a
// one-time deploy-time `kubectl apply`. Only nodevirt-controller mounts the
// Secret: its leader signs the agents' serving and nodevirt-api's client
// certificates through the CSR API and publishes ca.crt as the ConfigMap
// nodevirt-ca-bundle (cluster/certsigner). Nothing else ever holds ca.key.
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certsigner"
)

func main() {
	ttl := flag.Duration("ttl", 10*365*24*time.Hour, "CA validity")
	namespace := flag.String("namespace", "nodevirt", "namespace of the Secret (nodevirt-controller's)")
	flag.Parse()
	cert, key, err := certsigner.NewCA("nodevirt-ca", *ttl)
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
`, certsigner.CASecret, *namespace, certsigner.CACertKey, b64(cert), certsigner.CAKeyKey, b64(key))
}
