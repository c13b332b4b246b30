# The node API trust model: the CSR signer in nodevirt-controller
# (cluster/certsigner), the requester/rotator of the agent and nodevirt-api
# (cluster/certrotation) and the agent's mTLS authorization
# (node/api/tls.go). The integration test runs the signer with
# deploy/controller's RBAC against the real kube-apiserver of `make
# testenv` and requests as the agent's and nodevirt-api's ServiceAccounts
# (impersonated, with the node-name extra); no root needed.

.PHONY: test-pki

test-pki: testenv ## Run the node API PKI tests (signer plan table, rotator, CSR API integration with renewal, mTLS authorization).
	$(GO) test $(GOTEST_FLAGS) ./cluster/certsigner/... ./cluster/certrotation/... ./hack/nodeca/...
	$(GO) test $(GOTEST_FLAGS) -run 'TLS' ./node/api/...
