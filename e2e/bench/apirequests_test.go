package main

import (
	"testing"
)

// metricsBody is a slice of kube-apiserver's /metrics in its own format.
const metricsBody = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachineinstances",scope="resource",subresource="",verb="GET",version="v1"} 40
apiserver_request_total{code="404",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachineinstances",scope="resource",subresource="",verb="GET",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachineinstances",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachineinstances",scope="resource",subresource="status",verb="APPLY",version="v1"} 25
apiserver_request_total{code="409",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachineinstances",scope="resource",subresource="status",verb="APPLY",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 10
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 50
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 999
`

func TestParseRequests(t *testing.T) {
	got, err := parseRequests([]byte(metricsBody))
	if err != nil {
		t.Fatal(err)
	}
	want := apiRequests{
		{"virtualmachineinstances", "GET"}:          42, // every code
		{"virtualmachineinstances", "POST"}:         10,
		{"virtualmachineinstances/status", "APPLY"}: 26,
		{"pods", "LIST"}:                            7,
		{"pods", "WATCH"}:                           3,
		{"pods/binding", "POST"}:                    10,
		{"events", "POST"}:                          50,
	}
	if len(got) != len(want) {
		t.Errorf("parseRequests = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parseRequests([]byte("# TYPE other counter\nother 1\n")); err == nil {
		t.Error("a body without apiserver_request_total parsed")
	}
	if _, err := parseRequests([]byte("not {metrics")); err == nil {
		t.Error("a body that is no metrics text parsed")
	}
}

func TestRequestsPerObject(t *testing.T) {
	before := apiRequests{{"pods", "GET"}: 5, {"pods", "POST"}: 1, {"leases", "PUT"}: 3}
	after := apiRequests{
		{"pods", "GET"}: 9, {"pods", "POST"}: 5, {"pods", "LIST"}: 2, {"pods", "WATCH"}: 1,
		{"pods/status", "PATCH"}: 8, {"events", "POST"}: 4, {"leases", "PUT"}: 3,
	}
	d := after.since(before)
	if _, ok := d[requestKey{"leases", "PUT"}]; ok {
		t.Errorf("since kept an unchanged count: %v", d)
	}
	writes, gets := d.perObject(4)
	if writes != 4 || gets != 1 { // (4 + 8 + 4) / 4, 4 / 4; LIST and WATCH are neither
		t.Errorf("perObject(4) = %v writes, %v GETs, want 4, 1", writes, gets)
	}
	got := d.breakdown(4)
	want := "events POST 1.00, pods GET 1.00, pods LIST 0.50, pods POST 1.00, pods/status PATCH 2.00"
	if got != want {
		t.Errorf("breakdown = %q, want %q", got, want)
	}
	if got := (apiRequests{}).breakdown(3); got != "none" {
		t.Errorf("empty breakdown = %q", got)
	}
}
