module github.com/nodevirt/nodevirt

go 1.24.2

require (
	github.com/containernetworking/plugins v1.8.0
	github.com/google/go-cmp v0.7.0
	github.com/google/nftables v0.3.0
	github.com/insomniacslk/dhcp v0.0.0-20240829085014-a3a4c1f04475
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/sys v0.35.0
)

require (
	github.com/josharian/native v1.1.0 // indirect
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42 // indirect
	github.com/mdlayher/packet v1.1.2 // indirect
	github.com/mdlayher/socket v0.5.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.21 // indirect
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
)
