package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A burst step also counts the API requests it cost: kube-apiserver's
// apiserver_request_total, read just before the first creation and again
// once all objects ran, for the kinds an object's start touches (the VMI,
// its pod, their events). On this machine a VMI write costs the API
// server about 10 ms of CPU, so the count is the part of the VMIs' CPU
// time that the API server spends on their behalf, and what a change to
// the controller's or the agent's writes moves.

// requestKinds are the resources counted: a VMI's start writes these.
var requestKinds = []string{"virtualmachineinstances", "pods", "events"}

// requestKey is one resource (with its subresource: "pods/status") and
// verb (as the API server counts it: GET, POST, PUT, PATCH, APPLY, ...).
type requestKey struct{ resource, verb string }

// apiRequests are request counts by resource and verb.
type apiRequests map[requestKey]float64

// apiServerRequests reads kube-apiserver's apiserver_request_total, summed
// over response codes and scopes, for requestKinds.
func (e *env) apiServerRequests(ctx context.Context) (apiRequests, error) {
	body, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseRequests(body)
}

// parseRequests sums apiserver_request_total of a /metrics body by
// resource and verb, for requestKinds. It is pure.
func parseRequests(body []byte) (apiRequests, error) {
	fams, err := parseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("parse kube-apiserver metrics: %w", err)
	}
	f, ok := fams["apiserver_request_total"]
	if !ok {
		return nil, errors.New("kube-apiserver metrics: no apiserver_request_total")
	}
	out := apiRequests{}
	for _, m := range f.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if !slices.Contains(requestKinds, l["resource"]) {
			continue
		}
		res := l["resource"]
		if s := l["subresource"]; s != "" {
			res += "/" + s
		}
		out[requestKey{res, l["verb"]}] += m.GetCounter().GetValue()
	}
	return out, nil
}

// since is what a grew by after before.
func (a apiRequests) since(before apiRequests) apiRequests {
	out := apiRequests{}
	for k, v := range a {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// perObject is the writes and the GETs per object of n. LISTs and
// WATCHes are left out: they are the clients' (re)connections, not what
// an object cost.
func (a apiRequests) perObject(n int) (writes, gets float64) {
	for k, v := range a {
		switch k.verb {
		case "GET":
			gets += v
		case "LIST", "WATCH":
		default:
			writes += v
		}
	}
	return writes / float64(n), gets / float64(n)
}

// breakdown lists the requests per object of n by resource and verb
// ("pods/status PATCH 2.00, ..."), WATCHes left out.
func (a apiRequests) breakdown(n int) string {
	keys := make([]requestKey, 0, len(a))
	for k := range a {
		if k.verb != "WATCH" {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y requestKey) int {
		return cmp.Or(cmp.Compare(x.resource, y.resource), cmp.Compare(x.verb, y.verb))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s %.2f", k.resource, k.verb, a[k]/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
