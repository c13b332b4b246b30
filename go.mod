module github.com/nodevirt/nodevirt

go 1.24.0

require (
	github.com/google/go-cmp v0.7.0
	go.etcd.io/bbolt v1.4.3
)

require golang.org/x/sys v0.29.0 // indirect
