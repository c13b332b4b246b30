// Package deviceplugintest provides a fake kubelet for device plugin tests:
// a Registration service on kubelet.sock in a directory of the test's
// choosing, which records registrations, can restart the way a kubelet does
// (remove every socket in the directory, recreate kubelet.sock) and dials
// registered plugins like the kubelet's device manager.
package deviceplugintest
