package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// The suite reads VMIs and VMIMs as JSON into its own views (vmiView,
// vmimView) rather than the Go types: it checks the wire contract of
// docs/migration.md, whatever the Go field names.

// vmiView is the part of a VMI the scenarios look at.
type vmiView struct {
	Metadata struct {
		Name              string            `json:"name"`
		UID               string            `json:"uid"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase              string `json:"phase"`
		Reason             string `json:"reason"`
		NodeName           string `json:"nodeName"`
		EvacuationNodeName string `json:"evacuationNodeName"`
		Accelerator        string `json:"accelerator"`
		Interfaces         []struct {
			IPAddress string `json:"ipAddress"`
		} `json:"interfaces"`
		Conditions     []condition     `json:"conditions"`
		MigrationState *migrationState `json:"migrationState"`
	} `json:"status"`
}

// migrationState is a VMI's status.migrationState (KubeVirt's fields).
type migrationState struct {
	MigrationUID   string       `json:"migrationUid"`
	SourceNode     string       `json:"sourceNode"`
	SourcePod      string       `json:"sourcePod"`
	TargetNode     string       `json:"targetNode"`
	TargetPod      string       `json:"targetPod"`
	StartTimestamp *metav1.Time `json:"startTimestamp"`
	EndTimestamp   *metav1.Time `json:"endTimestamp"`
	Completed      bool         `json:"completed"`
	Failed         bool         `json:"failed"`
	AbortStatus    string       `json:"abortStatus"`
	FailureReason  string       `json:"failureReason"`
	Mode           string       `json:"mode"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// vmimView is the part of a VirtualMachineInstanceMigration the scenarios
// look at.
type vmimView struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase                     string `json:"phase"`
		PhaseTransitionTimestamps []struct {
			Phase string      `json:"phase"`
			Time  metav1.Time `json:"phaseTransitionTimestamp"`
		} `json:"phaseTransitionTimestamps"`
		Conditions     []condition     `json:"conditions"`
		MigrationState *migrationState `json:"migrationState"`
	} `json:"status"`
}

// podIP is the VMI's first interface address ("" when none).
func (v *vmiView) podIP() string {
	if len(v.Status.Interfaces) == 0 {
		return ""
	}
	return v.Status.Interfaces[0].IPAddress
}

func (v *vmiView) String() string {
	if v == nil {
		return "<none>"
	}
	ms := "none"
	if m := v.Status.MigrationState; m != nil {
		ms = fmt.Sprintf("{uid %s %s->%s completed=%t failed=%t abort=%q reason=%q}", m.MigrationUID, m.SourceNode,
			m.TargetNode, m.Completed, m.Failed, m.AbortStatus, m.FailureReason)
	}
	return fmt.Sprintf("uid=%s phase=%s node=%s ip=%s migrationState=%s deleting=%t", v.Metadata.UID, v.Status.Phase,
		v.Status.NodeName, v.podIP(), ms, v.Metadata.DeletionTimestamp != nil)
}

// getRaw GETs namespace/resource/name of kubevirt.io/v1 into out.
func (s *suite) getRaw(ctx context.Context, resource, name string, out any) error {
	b, err := s.virt.KubevirtV1().RESTClient().Get().Namespace(namespace).Resource(resource).Name(name).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("get %s %s: %w", resource, name, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", resource, name, err)
	}
	return nil
}

// getVMI returns VMI name; a missing VMI is an error wrapping NotFound.
func (s *suite) getVMI(ctx context.Context, name string) (*vmiView, error) {
	var v vmiView
	return &v, s.getRaw(ctx, "virtualmachineinstances", name, &v)
}

// waitVMI polls VMI name until cond holds and returns it.
func (s *suite) waitVMI(t *testing.T, name string, timeout time.Duration, what string, cond func(*vmiView) bool) *vmiView {
	t.Helper()
	var got, last *vmiView
	testenv.Eventually(t, timeout, fmt.Sprintf("VMI %s %s", name, what), func() error {
		v, err := s.getVMI(t.Context(), name)
		if err != nil {
			return fmt.Errorf("%w (last %s)", err, last)
		}
		if last = v; !cond(v) {
			return fmt.Errorf("VMI %s not %s: %s", name, what, v)
		}
		got = v
		return nil
	})
	return got
}

func running(v *vmiView) bool {
	return v.Status.Phase == "Running" && v.Metadata.DeletionTimestamp == nil
}

// runningOn is running on node with an address.
func runningOn(node string) func(*vmiView) bool {
	return func(v *vmiView) bool { return running(v) && v.Status.NodeName == node && v.podIP() != "" }
}

// kubectl runs kubectl with stdin (may be nil) and fails the test on error.
func (s *suite) kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := s.kubectlErr(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlErr runs kubectl with stdin (may be nil).
func (s *suite) kubectlErr(stdin []byte, args ...string) (string, error) {
	return s.cluster.KubectlText(5*time.Minute, stdin, args...)
}

// launcherPods returns the launcher pods of the VMI with uid (source and
// target pods of a migration alike), oldest first.
func (s *suite) launcherPods(t *testing.T, uid string) []corev1.Pod {
	t.Helper()
	pods, err := s.kube.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{
		LabelSelector: "kubevirt.io=virt-launcher,kubevirt.io/created-by=" + uid,
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// activePod returns the VMI's launcher pod on node that is not finished.
func (s *suite) activePod(t *testing.T, uid, node string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("a live launcher pod of VMI %s on %s", uid, node), func() error {
		var seen []string
		for _, p := range s.launcherPods(t, uid) {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				pod = p
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
		}
		return fmt.Errorf("launcher pods: %v", seen)
	})
	return pod
}

// podGoneOrDone reports whether pod name is deleted or has finished.
func (s *suite) podGoneOrDone(ctx context.Context, name string) (bool, string, error) {
	p, err := s.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, "deleted", nil
	case err != nil:
		return false, "", err
	}
	done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	return done, string(p.Status.Phase), nil
}

// dumpOnFailure dumps the cluster state when t fails.
func (s *suite) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{
			{"get", "-n", namespace, "vm,vmi,vmim,pods", "-o", "wide"},
			{"get", "-n", namespace, "vmi,vmim", "-o", "yaml"},
			{"get", "-n", namespace, "events", "--sort-by=.lastTimestamp"},
			{"get", "nodes", "-o", "wide", "--show-labels"},
			{"get", "-n", "nodevirt", "pods", "-o", "wide"},
			{"logs", "-n", "nodevirt", "deployment/nodevirt-controller", "--tail=150"},
		} {
			out, err := s.kubectlErr(nil, args...)
			t.Logf("--- kubectl %s (err %v)\n%s", strings.Join(args, " "), err, out)
		}
		for _, n := range s.cluster.Nodes {
			pods, err := s.kube.CoreV1().Pods("nodevirt").List(context.Background(), metav1.ListOptions{
				LabelSelector: "app.kubernetes.io/name=nodevirt-agent", FieldSelector: "spec.nodeName=" + n.Name,
			})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			out, err := s.kubectlErr(nil, "logs", "-n", "nodevirt", pods.Items[0].Name, "--tail=150")
			t.Logf("--- agent on %s (err %v)\n%s", n.Name, err, out)
		}
		for _, n := range s.cluster.Nodes {
			t.Logf("--- domains on %s\n%s", n.Name, s.domainsSummary(t, n.Name))
		}
	})
}

// domainsSummary lists the agent records of node (without their launch
// specs) and QEMU's run state of each live one.
func (s *suite) domainsSummary(t *testing.T, node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, body, err := s.nodeAPI(ctx, t, node, http.MethodGet, "/nodectl/v1/domains", nil)
	if err != nil || code != http.StatusOK {
		return fmt.Sprintf("list domains: %v HTTP %d %s", err, code, body)
	}
	var recs []map[string]any
	if err := json.Unmarshal(body, &recs); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, r := range recs {
		delete(r, "spec")
		delete(r, "sockets")
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteString("\n")
		if gone, _ := r["gone"].(string); gone == "" {
			uid, _ := r["uid"].(string)
			code, st, err := s.nodeAPI(ctx, t, node, http.MethodPost, "/nodectl/v1/qmp?vmi="+uid, map[string]any{"execute": "query-status"})
			fmt.Fprintf(&b, "  query-status: %v HTTP %d %s\n", err, code, st)
		}
	}
	return b.String()
}
