# shellcheck shell=bash
# The local cluster's throwaway PKI (openssl) and kubeconfigs. Sourced by
# up.sh after lib.sh. The CA and service-account keys are made once; a leaf
# certificate is remade when its subject or SANs change (e.g. another NODE_NET).

# pki_cert NAME CN O SANS EKU: a CA-signed leaf certificate in $PKI/NAME.{crt,key}.
pki_cert() {
	local name=$1 cn=$2 o=$3 sans=$4 eku=$5 want subj
	want="cn=$cn o=$o san=$sans eku=$eku"
	[ -f "$PKI/$name.crt" ] && [ "$(cat "$PKI/$name.params" 2>/dev/null)" = "$want" ] && return 0
	subj="/CN=$cn"
	[ -n "$o" ] && subj="/O=$o$subj"
	openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[ -n "$sans" ] && echo "subjectAltName=$sans"
	} >"$PKI/$name.ext"
	openssl req -new -key "$PKI/$name.key" -subj "$subj" 2>/dev/null |
		openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
			-extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.ext"
	echo "$want" >"$PKI/$name.params"
}

# pki_kubeconfig FILE CERTNAME: a kubeconfig for the API server with the
# client certificate embedded (so the file can be copied around).
pki_kubeconfig() {
	local file=$1 cert=$2
	cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: nodevirt-local
  cluster:
    server: https://$API_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$cert.crt")
    client-key-data: $(base64 -w0 "$PKI/$cert.key")
contexts:
- name: nodevirt-local
  context: {cluster: nodevirt-local, user: $cert}
current-context: nodevirt-local
KC
	chmod 600 "$file"
}

# pki_all: everything the control plane and NODES nodes need.
pki_all() {
	local i name ip
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	if [ ! -f "$PKI/ca.crt" ]; then
		openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
		openssl req -x509 -new -nodes -key "$PKI/ca.key" -subj "/CN=nodevirt-local-ca" -days 3650 -out "$PKI/ca.crt"
	fi
	if [ ! -f "$PKI/sa.key" ]; then
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
	pki_cert apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_IP,IP:$API_IP" serverAuth
	pki_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
	pki_cert front-proxy-client front-proxy-client "" "" clientAuth
	pki_cert admin kubernetes-admin system:masters "" clientAuth
	pki_cert scheduler system:kube-scheduler "" "" clientAuth
	pki_cert controller-manager system:kube-controller-manager "" "" clientAuth
	pki_cert kube-proxy system:kube-proxy "" "" clientAuth
	for ((i = 0; i < NODES; i++)); do
		name=$(node_name "$i") ip=$(node_ip "$i")
		mkdir -p "$(node_dir "$i")"
		pki_cert "kubelet$i-client" "system:node:$name" system:nodes "" clientAuth
		pki_cert "kubelet$i-serving" "$name" "" "DNS:$name,IP:$ip" serverAuth
		pki_kubeconfig "$(node_dir "$i")/kubelet.kubeconfig" "kubelet$i-client"
	done
	pki_kubeconfig "$KUBECONFIG_ADMIN" admin
	pki_kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" scheduler
	pki_kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager
	pki_kubeconfig "$CLUSTER_DIR/kube-proxy.kubeconfig" kube-proxy
}
