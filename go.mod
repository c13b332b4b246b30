module github.com/nodevirt/nodevirt

go 1.24.0
