// Package devices tests the node agent's device plugins (node/deviceplugin)
// against the real kubelet of a one-node local cluster (e2e/localcluster):
// the node advertises devices.kubevirt.io/tun (kvm only where KVM is
// usable), an unprivileged pod that requests tun gets a usable
// /dev/net/tun, and the plugins register again after the kubelet is
// SIGKILLed and restarted.
//
// It lives under e2e/ because it drives a cluster: no package outside e2e
// imports e2e. Prerequisites: root, the cluster binaries and the images
// (`make test-devices` provides them); a missing one skips the test
// locally and fails it under CI=true; -short always skips it.
package devices
