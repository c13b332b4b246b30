package acceptance

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/deviceplugin"
)

// testDevicesOutliveAgent (issue 18, found by the chaos run): the device
// plugins do not die with the agent. A pod asking for
// devices.kubevirt.io/tun, created on the node the moment its agent was
// SIGKILLed (host pid), is admitted and runs. When the agent served the
// plugins, the kubelet marked the devices unhealthy at the kill, and every
// launcher pod admitted before the agent was back — a new VM, a migration
// target — failed with UnexpectedAdmissionError.
func testDevicesOutliveAgent(t *testing.T, s *suite) {
	node := s.cluster.Nodes[0].Name
	agent := s.agentPod(t, node)
	sigkillAgent(t, agent)
	killed := time.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "tun-holder", Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:      node, // straight to the kubelet's admission
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "pause", Image: "nodevirt.local/pause:dev", ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					deviceplugin.ResourceTun: resource.MustParse("1"),
				}},
			}},
		},
	}
	if _, err := s.kube.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.kube.CoreV1().Pods(namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Errorf("delete pod %s: %v", pod.Name, err)
		}
	}()
	testenv.Eventually(t, time.Minute, "the tun-holding pod running", func() error {
		p, err := s.kube.CoreV1().Pods(namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case p.Status.Phase == corev1.PodFailed:
			t.Fatalf("pod %s failed at admission: %s: %s", p.Name, p.Status.Reason, p.Status.Message)
		case p.Status.Phase != corev1.PodRunning:
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	t.Logf("pod asking for %s ran %v after the agent's SIGKILL", deviceplugin.ResourceTun, time.Since(killed).Round(10*time.Millisecond))
	// The agent itself comes back in the same pod (the kubelet restarts
	// its container).
	testenv.Eventually(t, 2*time.Minute, "the agent ready again", func() error {
		p, err := s.kube.CoreV1().Pods("nodevirt").Get(t.Context(), agent.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(*p) {
			return fmt.Errorf("agent pod %s not ready", p.Name)
		}
		return nil
	})
}
