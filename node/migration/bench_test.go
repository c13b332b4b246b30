package migration

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
)

// BenchmarkChannel_Throughput pushes a migration stream through the whole
// channel on loopback (source proxy socket → mutual TLS → target server →
// the target's unix socket) into a sink: the channel's own ceiling, to set
// beside QEMU's total-time in docs/migration-benchmarks.md.
func BenchmarkChannel_Throughput(b *testing.B) {
	ca := certrotationtest.NewCA(b, "agents")
	roots := certrotation.StaticRoots{P: ca.Pool()}
	dir := b.TempDir()
	sink := filepath.Join(dir, "qemu-in.sock")
	l, err := net.Listen("unix", sink)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	got := make(chan int64, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n, _ := io.Copy(io.Discard, c)
			c.Close()
			got <- n
		}
	}()
	srv := NewServer(staticCert{ca.AgentServing(b, "b")}, roots, targetMap{"mig-1": {SourceNode: "a", Socket: sink}}, nil)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, tl) }()
	p, err := Dialer{Certs: staticCert{ca.AgentServing(b, "a")}, Roots: roots}.Listen(filepath.Join(dir, "out.sock"),
		Route{MigrationUID: "mig-1", TargetNode: "b", Address: tl.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()

	const size = 256 << 20
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		c, err := net.Dial("unix", filepath.Join(dir, "out.sock"))
		if err != nil {
			b.Fatal(err)
		}
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		_ = c.(*net.UnixConn).CloseWrite()
		if n := <-got; n != size {
			b.Fatalf("the sink got %d bytes, want %d", n, size)
		}
		c.Close()
	}
}
