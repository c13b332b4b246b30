package cloudinit

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// ErrInvalid is returned (wrapped) when a volume's cloud-init data cannot
// be used.
var ErrInvalid = errors.New("invalid cloud-init data")

// Secret keys accepted in a cloud-init secret volume (KubeVirt's spellings).
var (
	userDataKeys    = []string{"userdata", "userData"}
	networkDataKeys = []string{"networkdata", "networkData"}
)

// Config is the content of one NoCloud ISO.
type Config struct {
	InstanceID    string // meta-data instance-id: the VMI UID
	LocalHostname string // meta-data local-hostname
	UserData      []byte
	NetworkData   []byte // network-config; nil = no file
}

// NewConfig reads the cloudInitNoCloud volume named volume of vmi. secrets
// is the volume's mounted secret (the files of
// .../kubernetes.io~secret/<volume>-secret/); it may be nil when the volume
// references no secret.
func NewConfig(vmi *v1.VirtualMachineInstance, volume string, secrets fs.FS) (Config, error) {
	var src *v1.CloudInitNoCloudSource
	for i := range vmi.Spec.Volumes {
		if vmi.Spec.Volumes[i].Name == volume {
			src = vmi.Spec.Volumes[i].CloudInitNoCloud
		}
	}
	if src == nil {
		return Config{}, fmt.Errorf("%w: VMI %s/%s has no cloudInitNoCloud volume %q", ErrInvalid, vmi.Namespace, vmi.Name, volume)
	}
	cfg := Config{InstanceID: string(vmi.UID), LocalHostname: vmi.Spec.Hostname}
	if cfg.LocalHostname == "" {
		cfg.LocalHostname = vmi.Name
	}
	var err error
	if cfg.UserData, err = pick("userData", src.UserData, src.UserDataBase64, src.SecretRef != nil, secrets, userDataKeys); err != nil {
		return Config{}, fmt.Errorf("VMI %s/%s volume %q: %w", vmi.Namespace, vmi.Name, volume, err)
	}
	if cfg.NetworkData, err = pick("networkData", src.NetworkData, src.NetworkDataBase64, src.NetworkDataSecretRef != nil, secrets, networkDataKeys); err != nil {
		return Config{}, fmt.Errorf("VMI %s/%s volume %q: %w", vmi.Namespace, vmi.Name, volume, err)
	}
	return cfg, nil
}

// pick returns the one of plain, base64 or secret that is set (nil if none).
func pick(field, plain, b64 string, fromSecret bool, secrets fs.FS, keys []string) ([]byte, error) {
	set := 0
	for _, ok := range []bool{plain != "", b64 != "", fromSecret} {
		if ok {
			set++
		}
	}
	if set > 1 {
		return nil, fmt.Errorf("%w: more than one source for %s", ErrInvalid, field)
	}
	switch {
	case plain != "":
		return []byte(plain), nil
	case b64 != "":
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%w: %sBase64: %w", ErrInvalid, field, err)
		}
		return b, nil
	case fromSecret:
		if secrets == nil {
			return nil, fmt.Errorf("%w: %s comes from a secret but no secret volume was given", ErrInvalid, field)
		}
		for _, k := range keys {
			b, err := fs.ReadFile(secrets, k)
			if err == nil {
				return b, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("read secret key %q: %w", k, err)
			}
		}
		return nil, fmt.Errorf("%w: %s secret has none of the keys %q", ErrInvalid, field, keys)
	}
	return nil, nil
}
