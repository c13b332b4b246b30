// Command apicert makes nodevirt-api's certificates for a deploy-time
// `kubectl apply` and prints them as Secrets on stdout.
//
//	apicert serving
//	    a CA of its own and a serving certificate for the Service
//	    nodevirt-api.nodevirt.svc: Secret nodevirt-api-serving (tls.crt,
//	    tls.key, ca.crt). ca.crt is the APIServices' caBundle.
//	apicert client -ca-dir DIR
//	    a client certificate, CN nodevirt-api, issued by the node API CA in
//	    DIR (ca.crt, ca.key): Secret nodevirt-api-agent-client (tls.crt,
//	    tls.key). Interim, until nodevirt-api requests its client
//	    certificate through the CSR API.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodevirt/nodevirt/node/api"
)

const namespace = "nodevirt"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "apicert:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: apicert serving | client -ca-dir DIR")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	ttl := fs.Duration("ttl", 5*365*24*time.Hour, "certificate validity")
	caDir := fs.String("ca-dir", "", "directory with the node API CA's ca.crt and ca.key (client)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "serving":
		ca, caPEM, _, err := api.NewCA("nodevirt-api-serving-ca", *ttl)
		if err != nil {
			return err
		}
		svc := "nodevirt-api." + namespace + ".svc"
		cert, err := ca.Issue(svc, []string{svc, svc + ".cluster.local", "nodevirt-api." + namespace}, *ttl)
		if err != nil {
			return err
		}
		return printSecret("nodevirt-api-serving", cert, caPEM)
	case "client":
		if *caDir == "" {
			return errors.New("client: -ca-dir is required")
		}
		ca, err := api.LoadCADir(*caDir)
		if err != nil {
			return err
		}
		cert, err := ca.Issue("nodevirt-api", nil, *ttl)
		if err != nil {
			return err
		}
		return printSecret("nodevirt-api-agent-client", cert, nil)
	default:
		return fmt.Errorf("unknown command %q (serving, client)", args[0])
	}
}

func printSecret(name string, cert tls.Certificate, caPEM []byte) error {
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	fmt.Printf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/name: nodevirt-api
    app.kubernetes.io/part-of: nodevirt
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
`, name, namespace, b64(crt), b64(keyPEM))
	if caPEM != nil {
		fmt.Printf("  ca.crt: %s\n", b64(caPEM))
	}
	return nil
}
