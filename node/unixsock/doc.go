// Package unixsock reaches unix sockets whose paths are longer than
// sun_path allows. The launcher's and QEMU's sockets live in the kubelet's
// pod directories (node/podfs), whose paths alone are about 99 bytes, so
// most of them cannot be bound or dialled by name: bind(2) and connect(2)
// take at most 107 bytes.
//
// A long path is reached through /proc/self/fd/<N>/<name>, where N is an
// O_PATH descriptor of the socket's directory held open for the duration
// of the call. The socket keeps its real name in the file system.
//
// Everything here is safe for concurrent use; nothing is cached.
package unixsock
