package certrotation

import (
	certificatesv1 "k8s.io/api/certificates/v1"
)

// The names of nodevirt's node API trust model, shared by the signer in
// nodevirt-controller (cluster/certsigner), the node agent and
// nodevirt-api.
const (
	// SignerAgentServing issues the agents' node API serving certificates.
	SignerAgentServing = "nodevirt.io/agent-serving"
	// SignerAPIClient issues nodevirt-api's client certificate.
	SignerAPIClient = "nodevirt.io/api-client"

	// APIClientName is the subject CN of nodevirt-api's client certificate,
	// the only client identity the agents serve.
	APIClientName = "nodevirt-api"
	// AgentNamePrefix + node name is the subject CN of an agent's serving
	// certificate; its only DNS SAN is the node name.
	AgentNamePrefix = "system:nodevirt-agent:"

	// AgentServiceAccount and APIServiceAccount are the ServiceAccounts (in
	// the nodevirt namespace) that may request the certificates.
	AgentServiceAccount = "nodevirt-agent"
	APIServiceAccount   = "nodevirt-api"

	// NodeNameExtra is the user-info extra of a pod-bound ServiceAccount
	// token that names the node of the pod (Kubernetes ≥ 1.30, GA in 1.32).
	// The API server copies it into a CSR's spec.extra.
	NodeNameExtra = "authentication.kubernetes.io/node-name"

	// BundleConfigMap (key BundleKey, in the nodevirt namespace) is the
	// public trust bundle: the CA certificate(s) the signer issues from.
	// Agents and nodevirt-api mount it.
	BundleConfigMap = "nodevirt-ca-bundle"
	BundleKey       = "ca.crt"
)

// AgentName returns the subject CN of node's agent serving certificate.
func AgentName(node string) string { return AgentNamePrefix + node }

// AgentServing is the certificate request of the agent on node: it serves
// the node API and the migration channel, and authenticates the agent as a
// client to the other agents' migration channels (docs/migration.md).
func AgentServing(node string) Identity {
	return Identity{
		Signer:     SignerAgentServing,
		CommonName: AgentName(node),
		DNSNames:   []string{node},
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth,
			certificatesv1.UsageClientAuth},
	}
}

// APIClient is the certificate request of nodevirt-api.
func APIClient() Identity {
	return Identity{
		Signer:     SignerAPIClient,
		CommonName: APIClientName,
		Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
	}
}

// Identity is what a certificate is requested for.
type Identity struct {
	// Signer is the CSR's spec.signerName.
	Signer     string
	CommonName string
	DNSNames   []string
	Usages     []certificatesv1.KeyUsage
}
