package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodevirt/nodevirt/netsetup"
)

// netnsDir is where the container runtime's CNI plugins mount the pod
// network namespaces of the local cluster (cni-<id>).
const netnsDir = "/run/netns"

// networkLeftovers lists what nodevirt builds in a launcher pod's network
// namespace (netsetup: nvbr*/nvtap* links, the nodevirt nftables table)
// that is still in a pod network namespace or the host's. Once every VM is
// deleted there must be none: the namespaces of deleted pods are gone, and
// no other pod ever gets these.
func networkLeftovers() ([]string, error) {
	var out []string
	scan := func(where string, h netns.NsHandle) error {
		nl, err := netlink.NewHandleAt(h)
		if err != nil {
			return fmt.Errorf("netlink in %s: %w", where, err)
		}
		defer nl.Close()
		links, err := nl.LinkList()
		if err != nil {
			return fmt.Errorf("links of %s: %w", where, err)
		}
		for _, l := range links {
			if name := l.Attrs().Name; strings.HasPrefix(name, "nvbr") || strings.HasPrefix(name, "nvtap") {
				out = append(out, where+": link "+name)
			}
		}
		nft, err := nftables.New(nftables.WithNetNSFd(int(h)))
		if err != nil {
			return fmt.Errorf("nftables in %s: %w", where, err)
		}
		tables, err := nft.ListTables()
		if err != nil {
			return fmt.Errorf("nftables tables of %s: %w", where, err)
		}
		for _, t := range tables {
			if t.Name == netsetup.TableName {
				out = append(out, where+": nftables table "+t.Name)
			}
		}
		return nil
	}
	host, err := netns.Get() // the harness runs in the host's
	if err != nil {
		return nil, fmt.Errorf("host netns: %w", err)
	}
	err = scan("host", host)
	host.Close()
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), "cni-") {
			continue
		}
		h, err := netns.GetFromPath(filepath.Join(netnsDir, de.Name()))
		if err != nil {
			continue // gone meanwhile
		}
		err = scan(de.Name(), h)
		h.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// podDirsLeft lists the kubelet directories (volumes, the agent's sockets
// and serial logs among them) of launcher pods in uids still under one of
// the kubelet roots.
func podDirsLeft(roots []string, uids map[string]bool) []string {
	var out []string
	for _, root := range roots {
		for uid := range uids {
			if dir := filepath.Join(root, "pods", uid); exists(dir) {
				out = append(out, dir)
			}
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
