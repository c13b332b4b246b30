// Package consoleui serves nodevirt's console in the browser: a page on
// the user's own machine that lists the VMs of a namespace and opens their
// serial terminal and VNC screen, run by `kubectl nodevirt console-ui`
// (cmd/kubectl-nodevirt).
//
// Nothing runs in the cluster. The server listens on a loopback address and
// forwards every request under /k8s/ to the API server with the user's own
// kubeconfig credentials (rest.TransportFor), so RBAC is exactly the
// user's: listing, watching, the subresource API's lifecycle PUTs,
// guest-agent GETs and the console/vnc websockets (subprotocol
// plain.kubevirt.io) all go through kube-apiserver as that user.
//
//	browser ──(127.0.0.1, cookie)──► consoleui ──(user's credentials)──► kube-apiserver ──► nodevirt-api ──► agent
//
// Who may drive it: whoever presents the per-run random token. The URL the
// command prints carries it once (?token=); the server trades it for an
// HttpOnly SameSite=Strict cookie named for the port and redirects to a
// URL without it. Every other request needs the cookie. Requests must name
// the server's own host:port in Host (no DNS rebinding), and a request with
// an Origin must come from the page's own origin (no cross-site
// websockets or PUTs); Origin, Cookie and Referer are removed before a
// request leaves for the API server.
//
// The page (web/, plain JavaScript and CSS) is bundled by esbuild into
// assets/ by `make console-ui` and embedded with go:embed. A fresh clone
// has only assets/README.md there, so `go build ./...` works before the
// bundle is built; the server then answers a page saying to run
// `make console-ui`. The bundle is not committed.
//
// Concurrency: a Server's handler is safe for concurrent use; Run serves
// until its context ends.
package consoleui
