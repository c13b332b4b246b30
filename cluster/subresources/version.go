package subresources

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
)

// VersionInfo is KubeVirt's version.Info shape, answered by GET version.
type VersionInfo struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// KubeVirtLevel is the KubeVirt release whose API and virtctl nodevirt
// serves. virtctl compares its own major.minor with the server's
// gitVersion (a semantic version) and warns on a mismatch.
const KubeVirtLevel = "v1.6.0"

// BuildVersion describes the running binary from its embedded build
// information: gitVersion is KubeVirtLevel with nodevirt's own version as
// build metadata (v1.6.0+nodevirt.<module version, short VCS revision or
// devel>), then the VCS revision and state and the commit time.
func BuildVersion() VersionInfo {
	v := VersionInfo{
		GitVersion:   KubeVirtLevel + "+nodevirt.devel",
		GitTreeState: "unknown",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	own := ""
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		own = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.GitCommit = s.Value
			if own == "" && len(s.Value) >= 12 {
				own = s.Value[:12]
			}
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			v.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
		}
	}
	if own != "" {
		v.GitVersion = KubeVirtLevel + "+nodevirt." + buildMetadata(own)
	}
	return v
}

// buildMetadata keeps the characters semantic versioning allows in build
// metadata ([0-9A-Za-z-.]), replacing the others with '-'.
func buildMetadata(s string) string {
	b := []byte(strings.TrimPrefix(s, "v"))
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	return string(b)
}

func (h *Handler) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.cfg.Version)
}

// healthz answers like virt-api's: the API server is reachable.
func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	if _, err := h.deps.Kube.Discovery().RESTClient().Get().AbsPath("/healthz").DoRaw(r.Context()); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"apiserver": map[string]string{"connectivity": "failed", "error": err.Error()}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiserver": map[string]string{"connectivity": "ok"}})
}

// guestfs is not offered: nodevirt has no libguestfs image to run.
func (h *Handler) guestfs(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, statusFromCode(http.StatusNotFound, "guestfs is not supported by nodevirt"))
}
