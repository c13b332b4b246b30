package operator_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// rollOut writes every nodevirt Deployment's and DaemonSet's status as
// their controllers would once all pods run the current template.
func rollOut(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The operator may still be applying a component while its status is
	// faked: a conflict is retried on the object as it is now.
	for _, d := range deps.Items {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := kube.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n := int32(1)
			if cur.Spec.Replicas != nil {
				n = *cur.Spec.Replicas
			}
			cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
			_, err = kube.AppsV1().Deployments(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	dss, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range dss.Items {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := kube.AppsV1().DaemonSets(ns).Get(ctx, ds.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1,
				UpdatedNumberScheduled: 1, NumberReady: 1, NumberAvailable: 1}
			_, err = kube.AppsV1().DaemonSets(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
