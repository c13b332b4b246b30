// Command apicert makes nodevirt-api's serving certificate for a
// deploy-time `kubectl apply` and prints it as a Secret on stdout:
//
//	apicert [-ttl D]
//
// A CA of its own (its key is discarded once the certificate is signed)
// and a serving certificate for the Service nodevirt-api.nodevirt.svc:
// Secret nodevirt-api-serving (tls.crt, tls.key, ca.crt). ca.crt is the
// APIServices' caBundle. nodevirt-api's client certificate for the node
// agents is not made here: nodevirt-api requests it through the CSR API.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodevirt/nodevirt/cluster/certsigner"
)

const namespace = "nodevirt"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "apicert:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("apicert", flag.ContinueOnError)
	ttl := fs.Duration("ttl", 5*365*24*time.Hour, "certificate validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	caPEM, caKeyPEM, err := certsigner.NewCA("nodevirt-api-serving-ca", *ttl)
	if err != nil {
		return err
	}
	ca, err := certsigner.LoadCA(caPEM, caKeyPEM)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	svc := "nodevirt-api." + namespace + ".svc"
	now := time.Now()
	crt, err := ca.Sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: svc},
		DNSNames:    []string{svc, svc + ".cluster.local", "nodevirt-api." + namespace},
		NotBefore:   now.Add(-5 * time.Minute),
		NotAfter:    now.Add(*ttl),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public())
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	fmt.Printf(`apiVersion: v1
kind: Secret
metadata:
  name: nodevirt-api-serving
  namespace: %s
  labels:
    app.kubernetes.io/name: nodevirt-api
    app.kubernetes.io/part-of: nodevirt
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
  ca.crt: %s
`, namespace, b64(crt), b64(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), b64(caPEM))
	return nil
}
