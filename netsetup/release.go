package netsetup

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Release removes everything Ensure built for plan in the netns at
// netnsPath. It tolerates any half-built state and an already released or
// vanished netns. For bridge binding it gives the pod interface its address
// and routes back (from the record on the bridge) before deleting the bridge,
// so a crash during Release can be retried too.
func Release(ctx context.Context, netnsPath string, plan Plan) error {
	err := inNetNS(ctx, netnsPath, func() error {
		if err := deleteNAT(); err != nil {
			return err
		}
		return withRTNL(func(rt rtnl) error {
			if err := rt.deleteLink(plan.Tap); err != nil {
				return err
			}
			if plan.Binding == Bridge {
				if err := rt.restorePod(plan); err != nil {
					return err
				}
			}
			return rt.deleteLink(plan.Bridge)
		})
	})
	var gone ns.NSPathNotExistErr
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s network (bridge %q, tap %q): %w", plan.Binding, plan.Bridge, plan.Tap, err)
	}
	return nil
}

func (rt rtnl) restorePod(plan Plan) error {
	c, ok, err := rt.recordedPodConfig(plan.Bridge)
	if err != nil || !ok {
		return err
	}
	l, ok, err := rt.lookupLink(plan.PodInterface)
	if err != nil || !ok {
		return err
	}
	if br, ok, err := rt.lookupLink(plan.Bridge); err != nil {
		return err
	} else if ok && l.Attrs().MasterIndex == br.Attrs().Index {
		rt.changing()
		if err := rt.h.LinkSetNoMaster(l); err != nil {
			return fmt.Errorf("detach %q from %q: %w", plan.PodInterface, plan.Bridge, err)
		}
	}
	if _, err := rt.ensureAddr(plan.PodInterface, c.Addr); err != nil {
		return err
	}
	for _, r := range c.Routes {
		if err := rt.addRoute(l, r); err != nil {
			return err
		}
	}
	return nil
}
