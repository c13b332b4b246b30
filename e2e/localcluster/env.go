package localcluster

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Node is one node of the local cluster.
type Node struct {
	Name        string // Kubernetes node name
	IP          string // host-only node IP (kubelet, InternalIP)
	PodCIDR     string
	Containerd  string // containerd socket (CRI, namespace k8s.io)
	CTR         string // the ctr binary that matches the node's containerd
	KubeletRoot string // kubelet --root-dir (pods/<uid>/volumes/... live here)
	// Dir is the node's own directory (<state dir>/nodes/<name>): the place
	// for node-local state of software that would live in /var/lib on a
	// real node. Naming it by node name lets one DaemonSet reach each
	// node's directory with a hostPath of <state dir>/nodes and
	// subPathExpr: $(NODE_NAME).
	Dir string
	// DevicePlugins is the directory the node's kubelet sees as
	// /var/lib/kubelet/device-plugins: that very path for node 0, the
	// node's own directory for the others, which run in a mount namespace
	// of their own (hack/cluster/node-ns.sh).
	DevicePlugins string
}

// parseEnv reads the KEY=VALUE lines of cluster.env into a Cluster.
func parseEnv(r io.Reader) (*Cluster, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("cluster.env: malformed line %q", line)
		}
		kv[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cluster.env: %w", err)
	}
	n, err := strconv.Atoi(kv["NODES"])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("cluster.env: NODES=%q: want a positive number", kv["NODES"])
	}
	c := &Cluster{
		Dir:         kv["CLUSTER_DIR"],
		Kubeconfig:  kv["KUBECONFIG"],
		APIServer:   kv["API_SERVER"],
		ServiceCIDR: kv["SERVICE_CIDR"],
		// Clusters started before the setting existed had no gate.
		ImageVolumes: kv["IMAGE_VOLUMES"] == "true",
	}
	for i := range n {
		p := fmt.Sprintf("NODE%d_", i)
		node := Node{
			Name:        kv[p+"NAME"],
			IP:          kv[p+"IP"],
			PodCIDR:     kv[p+"POD_CIDR"],
			Containerd:  kv[p+"CONTAINERD"],
			CTR:         kv[p+"CTR"],
			KubeletRoot: kv[p+"KUBELET_ROOT"],
			Dir:         kv[p+"DIR"],

			DevicePlugins: kv[p+"DEVICE_PLUGINS"],
		}
		if node.Name == "" || node.IP == "" {
			return nil, fmt.Errorf("cluster.env: node %d: name or IP missing", i)
		}
		c.Nodes = append(c.Nodes, node)
	}
	if c.Dir == "" || c.Kubeconfig == "" {
		return nil, fmt.Errorf("cluster.env: CLUSTER_DIR or KUBECONFIG missing")
	}
	return c, nil
}
