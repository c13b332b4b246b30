// Package leader runs a component's work only while it holds a
// coordination.k8s.io Lease (client-go's leader election), and holds the
// lease until that work has returned, so a successor never runs alongside
// a predecessor still finishing. The cluster controller and the operator
// campaign through it. It writes only the Lease.
package leader
