package subresources

import (
	"net/http"
	"runtime"
	"runtime/debug"
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

// BuildVersion describes the running binary from its embedded build
// information: the module version (or "devel"), the VCS revision and
// state, the commit time.
func BuildVersion() VersionInfo {
	v := VersionInfo{
		GitVersion:   "devel",
		GitTreeState: "unknown",
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v.GitVersion = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.GitCommit = s.Value
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			v.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
		}
	}
	return v
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
