package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// BenchmarkLaunchPods creates N VMIs (env NODEVIRT_BENCH_VMIS, default
// 1000) against a real API server and measures how long the controller
// process takes to render and create their N launcher pods, and its RSS
// growth per VMI once every VMI is Scheduling. The setup is heavy: run
// with -benchtime=1x (make bench-controller). With NODEVIRT_BENCH_HEAP=<file>
// the controller runs with --profiling and its heap profile at the end is
// written there (go tool pprof).
func BenchmarkLaunchPods(b *testing.B) {
	n := 1000
	if v := os.Getenv("NODEVIRT_BENCH_VMIS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("NODEVIRT_BENCH_VMIS: %v", err)
		}
	}
	for range b.N {
		benchLaunchPods(b, n)
	}
}

func benchLaunchPods(b *testing.B, n int) {
	b.StopTimer()
	c := startCluster(b)
	heapFile := os.Getenv("NODEVIRT_BENCH_HEAP")
	listen := ""
	if heapFile != "" {
		listen = testenv.FreeLoopbackAddr(b)
	}
	r := c.startReplica(b, "bench", "--workers=8", "--listen="+listen, "--profiling="+strconv.FormatBool(heapFile != ""))
	testenv.Eventually(b, 30*time.Second, "leader", func() (bool, error) { return c.leaseHolder() == "bench", nil })
	time.Sleep(2 * time.Second) // let the idle controller settle before the baseline
	before := rssKB(b, r.cmd.Process.Pid)
	ns := c.namespace(b, "bench")

	b.StartTimer()
	start := time.Now()
	createVMIs(b, c, ns, n)
	created := time.Since(start)
	testenv.Eventually(b, 30*time.Minute, fmt.Sprintf("%d launcher pods", n), func() (bool, error) {
		pods, err := c.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(pods.Items) >= n, err
	})
	podsDone := time.Since(start)
	testenv.Eventually(b, 30*time.Minute, fmt.Sprintf("%d VMIs Scheduling", n), func() (bool, error) {
		vmis, err := c.kv.KubevirtV1().VirtualMachineInstances(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		k := 0
		for _, v := range vmis.Items {
			if v.Status.Phase == v1.Scheduling {
				k++
			}
		}
		return k == n, fmt.Errorf("%d of %d Scheduling", k, n)
	})
	allDone := time.Since(start)
	b.StopTimer()
	time.Sleep(3 * time.Second)
	after := rssKB(b, r.cmd.Process.Pid)
	perVMI := float64(after-before) / float64(n)
	b.ReportMetric(float64(n)/podsDone.Seconds(), "pods/s")
	b.ReportMetric(perVMI, "KiB-RSS/VMI")
	b.ReportMetric(float64(after)/1024, "MiB-RSS")
	if heapFile != "" {
		saveHeap(b, listen, heapFile)
	}
	b.Logf("%d VMIs: created by the test in %s; %d pods after %s; all Scheduling after %s; controller RSS %d → %d KiB (%.1f KiB per VMI)",
		n, created.Round(time.Millisecond), n, podsDone.Round(time.Millisecond), allDone.Round(time.Millisecond), before, after, perVMI)
}

func createVMIs(b *testing.B, c *cluster, ns string, n int) {
	mem := resource.MustParse("128Mi")
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				vmi := &v1.VirtualMachineInstance{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vmi-%05d", i), Namespace: ns, Labels: map[string]string{"bench": "true"}},
					Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem},
						Devices: v1.Devices{Disks: []v1.Disk{{Name: "root"}}}},
						Volumes: []v1.Volume{{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "example/disk:1"}}}},
				}
				if _, err := c.kv.KubevirtV1().VirtualMachineInstances(ns).Create(context.Background(), vmi, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create vmi: %v", err)
	}
}

// saveHeap writes the heap profile of the controller serving pprof on
// addr to file, after a GC.
func saveHeap(b *testing.B, addr, file string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		b.Fatal(err)
	}
}

// rssKB reads VmRSS of pid.
func rssKB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
