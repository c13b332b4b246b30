package operator

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// flagsOf is the map of spec.customizeComponents.flags named name:
// "api", "controller" or "handler" (KubeVirt's names).
func flagsOf(name string, f *v1.Flags) map[string]string {
	if f == nil {
		return nil
	}
	switch name {
	case "api":
		return f.API
	case "controller":
		return f.Controller
	case "handler":
		return f.Handler
	}
	return nil
}

// setFlags sets flags on the main (first) container of a Deployment's or
// DaemonSet's pod template: each flag k becomes --k=v (--k when v is
// empty), replacing the arguments that set k already and appended in
// name order otherwise. Each flag is one argument: nothing is split or
// passed through a shell.
func setFlags(u *unstructured.Unstructured, flags map[string]string, field string) error {
	kind := u.GetKind()
	if len(flags) == 0 || (kind != "Deployment" && kind != "DaemonSet") {
		return nil
	}
	path := []string{"spec", "template", "spec", "containers"}
	cs, _, err := unstructured.NestedSlice(u.Object, path...)
	if err != nil || len(cs) == 0 {
		return fmt.Errorf("%s: %s %s has no container: %v", field, kind, u.GetName(), err)
	}
	c, ok := cs[0].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %s %s: container 0 is not an object", field, kind, u.GetName())
	}
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		return fmt.Errorf("%s: %s %s: args: %w", field, kind, u.GetName(), err)
	}
	names := make([]string, 0, len(flags))
	for k := range flags {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		arg := "--" + k
		if v := flags[k]; v != "" {
			arg += "=" + v
		}
		sets := func(a string) bool { return a == "--"+k || strings.HasPrefix(a, "--"+k+"=") }
		i := slices.IndexFunc(args, sets)
		args = slices.DeleteFunc(args, sets)
		if i < 0 {
			args = append(args, arg)
		} else {
			args = slices.Insert(args, i, arg)
		}
	}
	if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
		return err
	}
	cs[0] = c
	return unstructured.SetNestedSlice(u.Object, cs, path...)
}
