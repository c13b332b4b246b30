package qmp

import "context"

// Screendump formats (QEMU ≥ 7.1 takes "format").
const (
	ScreendumpPNG = "png"
	ScreendumpPPM = "ppm"
)

// Screendump writes the current screen of the primary display to file, a
// path in QEMU's own mount view, in format (ScreendumpPNG or
// ScreendumpPPM). The file is complete when the command returns.
func (c *Conn) Screendump(ctx context.Context, file, format string) error {
	return c.Execute(ctx, "screendump", map[string]string{"filename": file, "format": format}, nil)
}

// MovePointer sends relative pointer motion (dx, dy) to the guest, as a
// mouse would: a blanked guest screen wakes up.
func (c *Conn) MovePointer(ctx context.Context, dx, dy int) error {
	type axis struct {
		Axis  string `json:"axis"`
		Value int    `json:"value"`
	}
	type event struct {
		Type string `json:"type"`
		Data axis   `json:"data"`
	}
	return c.Execute(ctx, "input-send-event", map[string]any{"events": []event{
		{Type: "rel", Data: axis{Axis: "x", Value: dx}},
		{Type: "rel", Data: axis{Axis: "y", Value: dy}},
	}}, nil)
}
