package operator

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
)

// The TLS material of an installation, in the KubeVirt's namespace. The
// operator makes each object once, when it is absent, and never replaces a
// valid one: the node API's CA (Secret nodevirt-ca: only the controller
// mounts it, to sign the agents' and nodevirt-api's CSRs), its public
// bundle (ConfigMap nodevirt-ca-bundle, made as the controller's signer
// makes it, certsigner.PlanBundle, and then kept by that signer) and nodevirt-api's serving certificate (Secret
// nodevirt-api-serving, under a CA of its own whose key is discarded; its
// ca.crt is the APIServices' caBundle, set by setCABundle at every apply).
// They are deleted with the components.
const (
	APIServingSecret = "nodevirt-api-serving"
	apiServiceName   = "nodevirt-api"

	nodeCATTL  = 10 * 365 * 24 * time.Hour
	servingTTL = 5 * 365 * 24 * time.Hour
)

// CoreClient is what the certificates need of the core API.
type CoreClient interface {
	Secrets(namespace string) corev1client.SecretInterface
	ConfigMaps(namespace string) corev1client.ConfigMapInterface
}

// certificateObjects are the objects of the TLS material, as kind/name.
var certificateObjects = []struct{ kind, name string }{
	{"Secret", certsigner.CASecret},
	{"ConfigMap", certrotation.BundleConfigMap},
	{"Secret", APIServingSecret},
}

// ensureCertificates makes what is missing of the TLS material in ns and
// returns the APIServices' caBundle (PEM).
func (op *Operator) ensureCertificates(ctx context.Context, ns string) ([]byte, error) {
	ca, err := op.ensureSecret(ctx, ns, certsigner.CASecret, corev1.SecretTypeOpaque, func(*corev1.Secret) bool { return true },
		func() (map[string][]byte, error) {
			crt, key, err := certsigner.NewCA("nodevirt-ca", nodeCATTL)
			return map[string][]byte{certsigner.CACertKey: crt, certsigner.CAKeyKey: key}, err
		})
	if err != nil {
		return nil, err
	}
	// The bundle as the controller's signer makes it (it keeps it after).
	bundle, _ := certsigner.PlanBundle(nil, string(ca.Data[certsigner.CACertKey]))
	bundle.Namespace = ns
	_, err = op.d.Core.ConfigMaps(ns).Create(ctx, bundle, metav1.CreateOptions{FieldManager: ManagedBy})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, bundle.Name, err)
	}
	names := servingNames(ns)
	serving, err := op.ensureSecret(ctx, ns, APIServingSecret, corev1.SecretTypeTLS,
		func(s *corev1.Secret) bool { return servingValid(s, names, op.d.Now()) },
		func() (map[string][]byte, error) {
			crt, key, caPEM, err := certsigner.NewServingCert(apiServiceName+"-serving-ca", names, servingTTL)
			return map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": caPEM}, err
		})
	if err != nil {
		return nil, err
	}
	return serving.Data["ca.crt"], nil
}

// ensureSecret returns Secret name of ns, made by newData when it is
// absent and made anew when valid says it is not.
func (op *Operator) ensureSecret(ctx context.Context, ns, name string, typ corev1.SecretType, valid func(*corev1.Secret) bool, newData func() (map[string][]byte, error)) (*corev1.Secret, error) {
	client := op.d.Core.Secrets(ns)
	cur, err := client.Get(ctx, name, metav1.GetOptions{})
	exists := err == nil
	switch {
	case exists && valid(cur):
		return cur, nil
	case !exists && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	data, err := newData()
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	if exists {
		next := cur.DeepCopy()
		next.Data, next.Type = data, typ
		updated, err := client.Update(ctx, next, metav1.UpdateOptions{FieldManager: ManagedBy})
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: renew: %w", ns, name, err)
		}
		op.d.Log.Info("secret renewed", "secret", ns+"/"+name)
		return updated, nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: certificateLabels()},
		Type:       typ,
		Data:       data,
	}
	created, err := client.Create(ctx, s, metav1.CreateOptions{FieldManager: ManagedBy})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.Get(ctx, name, metav1.GetOptions{}) // made meanwhile: keep it
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	op.d.Log.Info("secret created", "secret", ns+"/"+name)
	return created, nil
}

// remainingCertificates counts the TLS material objects still in ns.
func (op *Operator) remainingCertificates(ctx context.Context, ns string) (int, error) {
	n := 0
	for _, o := range certificateObjects {
		var err error
		if o.kind == "Secret" {
			_, err = op.d.Core.Secrets(ns).Get(ctx, o.name, metav1.GetOptions{})
		} else {
			_, err = op.d.Core.ConfigMaps(ns).Get(ctx, o.name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return 0, fmt.Errorf("%s %s/%s: %w", o.kind, ns, o.name, err)
		default:
			n++
		}
	}
	return n, nil
}

// deleteCertificates deletes the TLS material of ns.
func (op *Operator) deleteCertificates(ctx context.Context, ns string) error {
	var errs []error
	for _, o := range slices.Backward(certificateObjects) {
		var err error
		if o.kind == "Secret" {
			err = op.d.Core.Secrets(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		} else {
			err = op.d.Core.ConfigMaps(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", o.kind, ns, o.name, err))
		}
	}
	return errors.Join(errs...)
}

func certificateLabels() map[string]string {
	return map[string]string{ManagedByLabel: ManagedBy, "app.kubernetes.io/part-of": "nodevirt"}
}

// servingNames are nodevirt-api's Service names in ns, the first its CN.
func servingNames(ns string) []string {
	svc := apiServiceName + "." + ns + ".svc"
	return []string{svc, svc + ".cluster.local", apiServiceName + "." + ns}
}

// servingValid reports whether s holds a serving certificate for names
// with its CA, valid for more than a fifth of servingTTL from now.
func servingValid(s *corev1.Secret, names []string, now time.Time) bool {
	if len(s.Data[corev1.TLSPrivateKeyKey]) == 0 || len(s.Data["ca.crt"]) == 0 {
		return false
	}
	b, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if b == nil {
		return false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil || c.NotAfter.Sub(now) < servingTTL/5 {
		return false
	}
	for _, n := range names {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	return true
}

// setCABundle sets spec.caBundle of every APIService among objs that
// points at nodevirt-api's Service. Without it a forced apply would drop
// the field.
func setCABundle(objs []Object, bundle []byte) error {
	for _, o := range objs {
		if o.GetKind() != "APIService" {
			continue
		}
		svc, _, err := unstructured.NestedString(o.Object, "spec", "service", "name")
		if err != nil {
			return fmt.Errorf("APIService %s: %w", o.GetName(), err)
		}
		if svc != apiServiceName {
			continue
		}
		if err := unstructured.SetNestedField(o.Object, base64.StdEncoding.EncodeToString(bundle), "spec", "caBundle"); err != nil {
			return fmt.Errorf("APIService %s: %w", o.GetName(), err)
		}
	}
	return nil
}
