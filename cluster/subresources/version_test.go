package subresources

import (
	"regexp"
	"testing"
)

// semver is semantic versioning 2.0 with an optional leading v (virtctl
// trims it before parsing the server's gitVersion).
var semver = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func TestBuildVersion_SemverAtKubeVirtLevel(t *testing.T) {
	v := BuildVersion()
	if !semver.MatchString(v.GitVersion) {
		t.Errorf("gitVersion %q is not a semantic version (virtctl warns)", v.GitVersion)
	}
	if got := v.GitVersion[:len(KubeVirtLevel)]; got != KubeVirtLevel {
		t.Errorf("gitVersion %q does not start with the KubeVirt level %s", v.GitVersion, KubeVirtLevel)
	}
}

func TestBuildMetadata(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.1":                       "0.3.1",
		"v0.0.0-20261123-abcdef+dirty": "0.0.0-20261123-abcdef-dirty",
		"0123456789ab":                 "0123456789ab",
		"weird/version_string":         "weird-version-string",
	} {
		if got := buildMetadata(in); got != want || !semver.MatchString("v1.6.0+nodevirt."+got) {
			t.Errorf("buildMetadata(%q) = %q, want %q (a valid build metadata)", in, got, want)
		}
	}
}
