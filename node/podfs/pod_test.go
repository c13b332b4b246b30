package podfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPod_Paths(t *testing.T) {
	p, err := New("/k", "1234")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{
		p.Dir(), p.SocketsDir(), p.PrivateDir(), p.Socket(QMPSocket),
		p.CloudInitISO("ci"), p.SecretDir("ci"),
	}
	want := []string{
		"/k/pods/1234",
		"/k/pods/1234/volumes/kubernetes.io~empty-dir/sockets",
		"/k/pods/1234/volumes/kubernetes.io~empty-dir/private",
		"/k/pods/1234/volumes/kubernetes.io~empty-dir/sockets/qmp.sock",
		"/k/pods/1234/volumes/kubernetes.io~empty-dir/private/cloudinit/ci.iso",
		"/k/pods/1234/volumes/kubernetes.io~secret/ci-secret",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestNew_RejectsBadUIDs(t *testing.T) {
	for _, uid := range []string{"", ".", "..", "a/b", "../x"} {
		if _, err := New("/k", uid); err == nil {
			t.Errorf("New(%q) = nil error, want one", uid)
		}
	}
	p, err := New("", "u")
	if err != nil || p.KubeletRoot != DefaultKubeletRoot {
		t.Errorf("New with empty root = %+v, %v; want default root", p, err)
	}
}
