package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/gorilla/websocket"
	"golang.org/x/term"

	"github.com/nodevirt/nodevirt/node/api"
)

// escapeByte (Ctrl-]) ends a console session.
const escapeByte = 0x1d

// console attaches the terminal to the VMI's serial console: raw mode when
// stdin is a terminal, Ctrl-] to quit.
func console(ctx context.Context, cfg Config, c *api.Client, vmi string) error {
	ws, err := c.Console(ctx, vmi)
	if err != nil {
		return err
	}
	defer ws.Close()
	if fd := int(cfg.Stdin.Fd()); term.IsTerminal(fd) {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return fmt.Errorf("raw terminal: %w", err)
		}
		defer term.Restore(fd, old)
	}
	fmt.Fprintf(cfg.Stderr, "Connected to %s's console. Escape character is ^]\r\n", vmi)
	errc := make(chan error, 2)
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				errc <- err
				return
			}
			if _, err := cfg.Stdout.Write(b); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := cfg.Stdin.Read(buf)
			if n > 0 {
				in := buf[:n]
				i := bytes.IndexByte(in, escapeByte)
				if i >= 0 {
					in = in[:i]
				}
				if len(in) > 0 {
					if werr := ws.WriteMessage(websocket.BinaryMessage, in); werr != nil {
						errc <- werr
						return
					}
				}
				if i >= 0 {
					errc <- nil
					return
				}
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		var ce *websocket.CloseError
		if err == nil || errors.As(err, &ce) {
			return nil
		}
		return err
	}
}
