package convert

import (
	"encoding/json"
	"strings"
)

// escape makes s safe as a value in QEMU's key=value,key=value option
// syntax: a comma is doubled. Nothing else is special inside a value.
func escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// jsonArg encodes a JSON object argument (-device, -blockdev, -netdev).
// encoding/json sorts map keys, so the output is deterministic.
func jsonArg(obj map[string]any) string {
	b, err := json.Marshal(obj)
	if err != nil {
		// Only strings, bools, numbers and nested maps are ever passed.
		panic("convert: encode QEMU JSON argument: " + err.Error())
	}
	return string(b)
}
