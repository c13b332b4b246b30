package localcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Cluster
		wantErr bool
	}{
		{
			name: "TwoNodes",
			in: `CLUSTER_DIR=/x/.cluster
KUBECONFIG=/x/.cluster/kubeconfig
NODES=2
API_SERVER=https://10.199.0.1:36443
SERVICE_CIDR=10.96.0.0/16
IMAGE_VOLUMES=true
NODE0_NAME=n0
NODE0_IP=10.199.0.1
NODE0_POD_CIDR=10.244.0.0/24
NODE0_CONTAINERD=/x/.cluster/node0/run/containerd.sock
NODE0_KUBELET_ROOT=/x/.cluster/node0/kubelet
NODE0_DIR=/x/.cluster/nodes/n0
NODE0_CTR=/x/_output/containerd/bin/ctr
NODE0_DEVICE_PLUGINS=/var/lib/kubelet/device-plugins
NODE1_NAME=n1
NODE1_IP=10.199.0.2
NODE1_POD_CIDR=10.244.1.0/24
NODE1_CONTAINERD=/x/.cluster/node1/run/containerd.sock
NODE1_KUBELET_ROOT=/x/.cluster/node1/kubelet
NODE1_DEVICE_PLUGINS=/x/.cluster/nodes/n1/device-plugins
`,
			want: &Cluster{
				Dir: "/x/.cluster", Kubeconfig: "/x/.cluster/kubeconfig",
				APIServer: "https://10.199.0.1:36443", ServiceCIDR: "10.96.0.0/16", ImageVolumes: true,
				Nodes: []Node{
					{Name: "n0", IP: "10.199.0.1", PodCIDR: "10.244.0.0/24", Containerd: "/x/.cluster/node0/run/containerd.sock", CTR: "/x/_output/containerd/bin/ctr", KubeletRoot: "/x/.cluster/node0/kubelet", Dir: "/x/.cluster/nodes/n0",
						DevicePlugins: "/var/lib/kubelet/device-plugins"},
					{Name: "n1", IP: "10.199.0.2", PodCIDR: "10.244.1.0/24", Containerd: "/x/.cluster/node1/run/containerd.sock", KubeletRoot: "/x/.cluster/node1/kubelet",
						DevicePlugins: "/x/.cluster/nodes/n1/device-plugins"},
				},
			},
		},
		{name: "NoNodes", in: "CLUSTER_DIR=/x\nKUBECONFIG=/x/k\n", wantErr: true},
		{name: "NodeMissing", in: "CLUSTER_DIR=/x\nKUBECONFIG=/x/k\nNODES=1\n", wantErr: true},
		{name: "Malformed", in: "CLUSTER_DIR\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseEnv(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseEnv() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(Cluster{})); diff != "" {
				t.Errorf("parseEnv() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
