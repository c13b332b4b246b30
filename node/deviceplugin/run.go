package deviceplugin

import (
	"context"
	"errors"
	"sync"
)

// Run serves every device in devs (see HostDevices) with one Plugin each
// until ctx is cancelled. It returns an error only when a plugin cannot be
// created; serving failures are retried inside each plugin.
func Run(ctx context.Context, cfg Config, devs []Device) error {
	plugins := make([]*Plugin, 0, len(devs))
	var errs []error
	for _, d := range devs {
		p, err := New(d, cfg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plugins = append(plugins, p)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var wg sync.WaitGroup
	runErrs := make([]error, len(plugins))
	for i, p := range plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runErrs[i] = p.Run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(runErrs...)
}
