// Package certsigner is the signer of nodevirt's node API certificates in
// the Kubernetes CSR API (certificates.k8s.io/v1). It runs in the leader
// of nodevirt-controller, the only component holding the CA key (Secret
// nodevirt-ca, keys ca.crt and ca.key, mounted only into the controller;
// LoadCADir). The requesters are in cluster/certrotation, which also fixes
// the signer names and identities.
//
// Signers and rules (anything else is Denied, with a condition reason and a
// message naming the offending field):
//
//	nodevirt.io/agent-serving  spec.username system:serviceaccount:<ns>:nodevirt-agent
//	                           spec.extra[authentication.kubernetes.io/node-name] = [N]
//	                           subject exactly CN=system:nodevirt-agent:N, DNS SANs exactly [N]
//	                           usages: server auth (+ digital signature, key encipherment)
//	nodevirt.io/api-client     spec.username system:serviceaccount:<ns>:nodevirt-api
//	                           subject exactly CN=nodevirt-api, no SANs
//	                           usages: client auth (+ digital signature, key encipherment)
//
// both: a PEM CERTIFICATE REQUEST with a valid signature, an ECDSA P-256 or
// RSA ≥ 2048-bit key; no IP, e-mail or URI SANs.
//
// The node name comes from the requester's token, never from the request:
// the API server copies the authenticated user's extras into spec.extra,
// and a pod-bound ServiceAccount token (what the kubelet projects into the
// agent's pod) carries authentication.kubernetes.io/node-name since
// Kubernetes 1.30 (feature ServiceAccountTokenPodNodeInfo, GA and locked on
// in 1.32). A request without it (a legacy Secret-based token, a
// hand-made token) is denied with reason MissingNodeName.
//
// What it writes (one writer per field): on CSRs of its two signers the
// Approved or Denied condition (approval subresource), the Failed
// condition and status.certificate (status subresource); the ConfigMap
// nodevirt-ca-bundle (key ca.crt: every certificate of the Secret's
// ca.crt) in the controller's namespace, created when missing and put back
// when edited. CSRs of other signers, and finished ones (issued, Denied,
// Failed), are left alone. A CSR someone else approved is still checked:
// if it breaks the rules it gets Failed, never a certificate.
//
// Certificates: subject CN and DNS SANs of the request, NotBefore one
// minute back (clock skew), NotAfter now + lifetime (default 24 h), or
// spec.expirationSeconds when shorter, capped at the CA's NotAfter; key
// usage digital signature (+ key encipherment for RSA when asked), one
// extended usage (server or client auth), not a CA.
//
// Sync follows the house shape: lister → pure Plan (table-tested) → apply
// (approve, then sign, in one sync; a crash in between leaves an approved
// CSR that the next sync signs).
package certsigner
