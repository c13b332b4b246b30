package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kube posts a SelfSubjectReview to the API server named by the
// KUBERNETES_SERVICE_HOST/PORT variables, authenticated with the pod's
// service-account token, and prints who the server says we are.
func kube(ctx context.Context) error {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return errors.New("KUBERNETES_SERVICE_HOST/PORT not set")
	}
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return fmt.Errorf("read service-account token: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return fmt.Errorf("read service-account CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("service-account CA: no certificates")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(host, port) + "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post %s: %w", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("post %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("post %s: %s: %s", url, resp.Status, raw)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &review); err != nil {
		return fmt.Errorf("decode SelfSubjectReview: %w", err)
	}
	fmt.Printf("apiserver %s status=%d user=%s\n", net.JoinHostPort(host, port), resp.StatusCode, review.Status.UserInfo.Username)
	return nil
}
