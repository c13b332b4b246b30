// Package bareqemu starts a bare QEMU for tests and benchmark floors: no
// agent, no launcher, just the binary with the arguments a test gives and
// a QMP socket the test holds. The process is the test's own child,
// killed by pid when the test ends.
package bareqemu
