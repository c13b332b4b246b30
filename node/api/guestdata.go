package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/nodevirt/nodevirt/qmp"
)

// The guest data shapes are KubeVirt's (VirtualMachineInstanceGuestAgentInfo,
// VirtualMachineInstanceGuestOSUserList, VirtualMachineInstanceFileSystemList).

// GuestAgentInfo is the answer of guestosinfo.
type GuestAgentInfo struct {
	GuestAgentVersion string      `json:"guestAgentVersion,omitempty"`
	Hostname          string      `json:"hostname,omitempty"`
	OS                GuestOSInfo `json:"os"`
	Timezone          string      `json:"timezone,omitempty"`
	FSFreezeStatus    string      `json:"fsFreezeStatus,omitempty"`
	UserList          []User      `json:"userList,omitempty"`
	FSInfo            FSInfoBlock `json:"fsInfo,omitzero"`
}

// GuestOSInfo is the guest's os-release.
type GuestOSInfo struct {
	Name          string `json:"name,omitempty"`
	KernelRelease string `json:"kernelRelease,omitempty"`
	Version       string `json:"version,omitempty"`
	PrettyName    string `json:"prettyName,omitempty"`
	VersionID     string `json:"versionId,omitempty"`
	KernelVersion string `json:"kernelVersion,omitempty"`
	Machine       string `json:"machine,omitempty"`
	ID            string `json:"id,omitempty"`
}

// FSInfoBlock wraps the file systems in guestosinfo.
type FSInfoBlock struct {
	Disks []FileSystem `json:"disks,omitempty"`
}

// User is one logged-in guest user.
type User struct {
	UserName  string  `json:"userName"`
	Domain    string  `json:"domain,omitempty"`
	LoginTime float64 `json:"loginTime,omitempty"`
}

// FileSystem is one mounted guest file system.
type FileSystem struct {
	DiskName       string `json:"diskName"`
	MountPoint     string `json:"mountPoint"`
	FileSystemType string `json:"fileSystemType"`
	UsedBytes      int64  `json:"usedBytes"`
	TotalBytes     int64  `json:"totalBytes"`
}

// UserList is the answer of userlist.
type UserList struct {
	Items []User `json:"items"`
}

// FileSystemList is the answer of filesystemlist.
type FileSystemList struct {
	Items []FileSystem `json:"items"`
}

// guestData handles GET .../{guestosinfo|userlist|filesystemlist}.
func (s *Server) guestData(what string) uidHandler {
	return func(w http.ResponseWriter, r *http.Request, uid string) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
		defer cancel()
		ga, err := s.deps.Domains.GuestAgent(ctx, uid)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		var v any
		switch what {
		case "guestosinfo":
			v, err = guestOSInfo(ctx, ga)
		case "userlist":
			var us []User
			us, err = users(ctx, ga)
			v = UserList{Items: us}
		default:
			var fs []FileSystem
			fs, err = fileSystems(ctx, ga)
			v = FileSystemList{Items: fs}
		}
		if err != nil {
			s.fail(w, r, fmt.Errorf("VMI %s: %s: %w", uid, what, err))
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// guestOSInfo gathers guestosinfo; only the OS info is required, the rest
// is filled in when the guest agent supports it.
func guestOSInfo(ctx context.Context, ga *qmp.Agent) (GuestAgentInfo, error) {
	os, err := ga.OSInfo(ctx)
	if err != nil {
		return GuestAgentInfo{}, err
	}
	out := GuestAgentInfo{OS: GuestOSInfo{
		Name: os.Name, KernelRelease: os.KernelRelease, Version: os.Version, PrettyName: os.PrettyName,
		VersionID: os.VersionID, KernelVersion: os.KernelVersion, Machine: os.Machine, ID: os.ID,
	}}
	if info, err := ga.Info(ctx); err == nil {
		out.GuestAgentVersion = info.Version
	}
	if h, err := ga.HostName(ctx); err == nil {
		out.Hostname = h
	}
	if tz, err := ga.Timezone(ctx); err == nil {
		out.Timezone = fmt.Sprintf("%s, %d", tz.Zone, tz.Offset)
	}
	if st, err := ga.FSFreezeStatus(ctx); err == nil {
		out.FSFreezeStatus = st
	}
	if us, err := users(ctx, ga); err == nil {
		out.UserList = us
	}
	if fs, err := fileSystems(ctx, ga); err == nil {
		out.FSInfo.Disks = fs
	}
	return out, nil
}

func users(ctx context.Context, ga *qmp.Agent) ([]User, error) {
	us, err := ga.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]User, 0, len(us))
	for _, u := range us {
		out = append(out, User{UserName: u.User, Domain: u.Domain, LoginTime: u.LoginTime})
	}
	return out, nil
}

func fileSystems(ctx context.Context, ga *qmp.Agent) ([]FileSystem, error) {
	fs, err := ga.FSInfo(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]FileSystem, 0, len(fs))
	for _, f := range fs {
		out = append(out, FileSystem{
			DiskName: f.Name, MountPoint: f.Mountpoint, FileSystemType: f.Type,
			UsedBytes: int64(f.UsedBytes), TotalBytes: int64(f.TotalBytes),
		})
	}
	return out, nil
}
