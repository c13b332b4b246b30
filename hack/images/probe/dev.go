package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// dev checks that a device node is usable by this process: it must be a
// character or block device that opens read-write (the device cgroup
// allows it). It prints "<path> char <major>:<minor> uid=<uid> open=rw".
func dev(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe dev PATH")
	}
	path := args[0]
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	kind := "char"
	switch {
	case !ok:
		return fmt.Errorf("%s: no stat data", path)
	case fi.Mode()&os.ModeCharDevice != 0:
	case fi.Mode()&os.ModeDevice != 0:
		kind = "block"
	default:
		return fmt.Errorf("%s: not a device node (mode %v)", path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	f.Close()
	major := (st.Rdev>>8)&0xfff | (st.Rdev>>32)&^0xfff
	minor := st.Rdev&0xff | (st.Rdev>>12)&^0xff
	fmt.Printf("%s %s %d:%d uid=%d open=rw\n", path, kind, major, minor, os.Getuid())
	return nil
}
