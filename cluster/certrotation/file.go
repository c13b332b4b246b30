package certrotation

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// EncodePEM is the file format of a certificate and its key: the
// certificate chain as CERTIFICATE blocks, then the key as one PKCS#8
// PRIVATE KEY block.
func EncodePEM(cert tls.Certificate) ([]byte, error) {
	var out []byte
	for _, der := range cert.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...), nil
}

// DecodePEM parses the EncodePEM format (with Leaf set).
func DecodePEM(data []byte) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(data, data)
	if err != nil {
		return tls.Certificate{}, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	return c, nil
}

// WriteFile stores cert and its key at path (mode 0600) atomically: a
// crash leaves the old pair or the new one, never a mix.
func WriteFile(path string, cert tls.Certificate) error {
	data, err := EncodePEM(cert)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certificate dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadFile loads a pair written by WriteFile.
func ReadFile(path string) (tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tls.Certificate{}, err
	}
	c, err := DecodePEM(data)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate file %s: %w", path, err)
	}
	return c, nil
}
