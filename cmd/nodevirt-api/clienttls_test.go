package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	nodeapi "github.com/nodevirt/nodevirt/node/api"
)

// writeClientFiles issues a client certificate from a fresh CA and writes
// cert, key and CA as PEM files in dir.
func writeClientFiles(t *testing.T, dir string) {
	t.Helper()
	ca, caPEM, _, err := nodeapi.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("nodevirt-api", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
		"ca.crt":  caPEM,
	} {
		// Replace, as the kubelet does (a new file, renamed over).
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientTLSFiles_ReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	f := &clientTLSFiles{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), ca: filepath.Join(dir, "ca.crt")}
	if _, err := f.clientTLS(); err == nil {
		t.Fatal("no files: want an error")
	}
	writeClientFiles(t, dir)
	c1, err := f.clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := f.clientTLS(); again != c1 {
		t.Error("unchanged files: want the cached configuration")
	}
	time.Sleep(10 * time.Millisecond) // a distinct modification time
	writeClientFiles(t, dir)
	c2, err := f.clientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if string(c2.Certificates[0].Certificate[0]) == string(c1.Certificates[0].Certificate[0]) {
		t.Error("renewed certificate not picked up")
	}
}

func TestClientTLSFiles_Validate(t *testing.T) {
	if err := (&clientTLSFiles{cert: "a"}).validate(); err == nil {
		t.Error("cert without key: want an error")
	}
	if err := (&clientTLSFiles{}).validate(); err != nil {
		t.Errorf("no files: %v (allowed; VMI routes then fail)", err)
	}
}
