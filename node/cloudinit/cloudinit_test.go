package cloudinit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/kdomanski/iso9660"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func vmiWith(src v1.CloudInitNoCloudSource, hostname string) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns", UID: "uid-1"},
		Spec: v1.VirtualMachineInstanceSpec{
			Hostname: hostname,
			Volumes:  []v1.Volume{{Name: "ci", CloudInitNoCloud: &src}},
		},
	}
}

func TestNewConfig(t *testing.T) {
	ref := &corev1.LocalObjectReference{Name: "s"}
	tests := []struct {
		name    string
		src     v1.CloudInitNoCloudSource
		host    string
		secrets fs.FS
		want    Config
		wantErr error
	}{
		{name: "inline", src: v1.CloudInitNoCloudSource{UserData: "#!/bin/sh\n", NetworkData: "version: 2\n"},
			want: Config{InstanceID: "uid-1", LocalHostname: "vm1", UserData: []byte("#!/bin/sh\n"), NetworkData: []byte("version: 2\n")}},
		{name: "base64 and hostname", src: v1.CloudInitNoCloudSource{UserDataBase64: base64.StdEncoding.EncodeToString([]byte("hi"))}, host: "h",
			want: Config{InstanceID: "uid-1", LocalHostname: "h", UserData: []byte("hi")}},
		{name: "secret lower-case keys", src: v1.CloudInitNoCloudSource{SecretRef: ref, NetworkDataSecretRef: ref},
			secrets: fstest.MapFS{"userdata": {Data: []byte("u")}, "networkdata": {Data: []byte("n")}},
			want:    Config{InstanceID: "uid-1", LocalHostname: "vm1", UserData: []byte("u"), NetworkData: []byte("n")}},
		{name: "secret camel-case key", src: v1.CloudInitNoCloudSource{SecretRef: ref},
			secrets: fstest.MapFS{"userData": {Data: []byte("u")}},
			want:    Config{InstanceID: "uid-1", LocalHostname: "vm1", UserData: []byte("u")}},
		{name: "secret without key", src: v1.CloudInitNoCloudSource{SecretRef: ref}, secrets: fstest.MapFS{}, wantErr: ErrInvalid},
		{name: "secret not mounted", src: v1.CloudInitNoCloudSource{SecretRef: ref}, wantErr: ErrInvalid},
		{name: "two sources", src: v1.CloudInitNoCloudSource{UserData: "a", UserDataBase64: "YQ=="}, wantErr: ErrInvalid},
		{name: "bad base64", src: v1.CloudInitNoCloudSource{UserDataBase64: "!!"}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewConfig(vmiWith(tt.src, tt.host), "ci", tt.secrets)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewConfig error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NewConfig (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteFile_ReadBack(t *testing.T) {
	cfg := Config{InstanceID: "uid-1", LocalHostname: `evil"\nhost: x`, UserData: []byte("#!/bin/sh\necho hello\n"), NetworkData: []byte("version: 2\n")}
	path := filepath.Join(t.TempDir(), "cloudinit", "ci.iso")
	if err := WriteFile(path, cfg, -1, -1); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := iso9660.OpenImage(f)
	if err != nil {
		t.Fatal(err)
	}
	label, err := img.Label()
	if err != nil || label != VolumeLabel {
		t.Errorf("label = %q, %v; want %q", label, err, VolumeLabel)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range children {
		b, err := io.ReadAll(c.Reader())
		if err != nil {
			t.Fatal(err)
		}
		got[c.Name()] = string(b)
	}
	want := map[string]string{
		"user-data":      string(cfg.UserData),
		"meta-data":      string(cfg.MetaData()),
		"network-config": "version: 2\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ISO content (-want +got):\n%s", diff)
	}
	var md map[string]string
	if err := json.Unmarshal(bytes.TrimSpace(cfg.MetaData()), &md); err != nil || md["local-hostname"] != cfg.LocalHostname || len(md) != 2 {
		t.Errorf("meta-data %q does not round-trip: %v %v", cfg.MetaData(), md, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".cidata-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
