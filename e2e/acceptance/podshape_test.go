package acceptance

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// defaultShape is the launcher pod shape hack/deploy-local.sh gives this
// run: POD_SHAPE, else ImageVolumes on a cluster with the ImageVolume gate,
// else Containers.
func (s *suite) defaultShape() string {
	if v := os.Getenv("POD_SHAPE"); v != "" {
		return v
	}
	if s.cluster.ImageVolumes {
		return "ImageVolumes"
	}
	return "Containers"
}

// Issue 23: launcher pods have the deployed shape — one container with the
// containerDisk and kernelBoot images as image volumes, or the fallback of
// init and holder containers — and a kernelBoot VMI and a containerDisk VM
// boot in it.
func testPodShape(t *testing.T, s *suite) { s.checkPodShape(t, s.defaultShape()) }

// Issue 23: the same on the fallback shape, redeployed on the same cluster
// (POD_SHAPE=Containers), then the default shape again.
func testPodShapeFallback(t *testing.T, s *suite) {
	if s.defaultShape() == "Containers" {
		t.Skip("the suite runs on the fallback shape already")
	}
	log := &testLog{t: t}
	if err := localcluster.Deploy(t.Context(), s.cluster, log, "POD_SHAPE=Containers"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := localcluster.Deploy(ctx, s.cluster, log); err != nil {
			t.Errorf("back to the default shape: %v", err)
		}
	})
	s.checkPodShape(t, "Containers")
}

func (s *suite) checkPodShape(t *testing.T, shape string) {
	cm, err := s.kube.CoreV1().ConfigMaps("nodevirt").Get(t.Context(), "nodevirt-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["launcherPodShape"]; got != shape {
		t.Fatalf("nodevirt was deployed with launcher pod shape %q, want %q", got, shape)
	}
	t.Logf("launcher pod shape %s (cluster ImageVolume gate %t)", shape, s.cluster.ImageVolumes)

	start := time.Now()
	kernel := s.startVMI(t, "shape-kernel")
	t.Logf("kernelBoot VMI: guest ready %v after create", time.Since(start).Round(100*time.Millisecond))
	defer s.deleteVMI(t, kernel.Name)
	checkShape(t, shape, s.launcherPod(t, kernel), []string{"kernel-boot"})

	start = time.Now()
	s.apply(t, s.example(t, "vm-v1alpha3.yaml", "shape-disk"))
	disk := s.waitVMI(t, "shape-disk", 90*time.Second, "Running", phaseIs(v1.Running))
	defer s.deleteVM(t, "shape-disk")
	pod := s.launcherPod(t, disk)
	s.waitSerial(t, pod, "NODEVIRT-GUEST-READY", 90*time.Second)
	t.Logf("containerDisk VM: guest ready %v after create", time.Since(start).Round(100*time.Millisecond))
	var diskVolumes []string
	for _, v := range disk.Spec.Volumes {
		if v.ContainerDisk != nil {
			diskVolumes = append(diskVolumes, v.Name+"-image")
		}
	}
	if len(diskVolumes) == 0 {
		t.Fatal("example vm-v1alpha3.yaml has no containerDisk")
	}
	checkShape(t, shape, pod, diskVolumes)
}

// checkShape checks pod against shape; images are the image volumes the
// ImageVolumes shape must have.
func checkShape(t *testing.T, shape string, pod corev1.Pod, images []string) {
	t.Helper()
	var names []string
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		names = append(names, c.Name)
	}
	imageVolumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			imageVolumes[v.Name] = true
		}
	}
	switch shape {
	case "ImageVolumes":
		if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Containers) != 1 {
			t.Errorf("pod %s has containers %s, want only compute", pod.Name, strings.Join(names, ", "))
		}
		for _, name := range images {
			if !imageVolumes[name] {
				t.Errorf("pod %s has no image volume %s (image volumes: %v)", pod.Name, name, imageVolumes)
			}
		}
	case "Containers":
		if len(imageVolumes) != 0 || len(pod.Spec.InitContainers) == 0 {
			t.Errorf("pod %s: containers %s, image volumes %v; want the fallback shape", pod.Name, strings.Join(names, ", "), imageVolumes)
		}
	default:
		t.Fatalf("deployed launcher pod shape %q", shape)
	}
}
