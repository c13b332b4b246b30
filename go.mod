module github.com/nodevirt/nodevirt

go 1.24.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	go.etcd.io/bbolt v1.4.3 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
