// Package certrotation is the requesting side of nodevirt's node API trust
// model: the node agent (serving certificate) and nodevirt-api (client
// certificate) get their certificates through the Kubernetes CSR API
// (certificates.k8s.io/v1) from the signer in nodevirt-controller
// (cluster/certsigner), the only holder of the CA key. It is a library, not
// a controller: node/ may import it (as it imports cluster/reconcile).
//
// identity.go fixes the shared names: signers nodevirt.io/agent-serving
// (CN "system:nodevirt-agent:<node>", DNS SAN exactly <node>, server auth)
// and nodevirt.io/api-client (CN "nodevirt-api", no SANs, client auth), the
// ServiceAccounts allowed to ask, and the public bundle ConfigMap
// nodevirt-ca-bundle (key ca.crt).
//
// A Rotator generates an ECDSA P-256 key in the process, creates a CSR
// (generateName from the CN) for its signer, watches it until it carries a
// certificate or a Denied/Failed condition, checks that the certificate
// certifies its key for its identity, and keeps it current. It renews at
// RenewFraction (default 0.7) plus up to RenewJitter (0.1) of the
// lifetime, and at once when Config.Roots no longer verify it (the CA was
// replaced; at most once per CheckInterval). A failed request is retried
// with backoff while the old certificate stays in use. With Config.File
// the pair is written atomically to one PEM file (mode 0600, in a 0700
// directory) so a restart reuses a valid certificate instead of asking
// again. GetCertificate and GetClientCertificate hand the current pair to
// tls.Config: a renewal needs no restart, and nothing of the node's VMs is
// touched. The package writes no API object but its own CSRs, and never
// deletes them (kube-controller-manager's CSR cleaner does).
//
// A Bundle is a trust bundle file (the mounted ConfigMap) re-read when it
// changes (checked at most every interval), keeping the last good pool if
// the file vanishes.
//
// Concurrency: a Rotator's callbacks and accessors are safe from any
// goroutine; Run is called once.
package certrotation
