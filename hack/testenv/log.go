package testenv

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// LogWriter returns a writer that logs each write with t.Log (trailing
// newlines trimmed), for a child process's or a script's output. Like
// t.Log itself it must not be written to after the test has finished.
func LogWriter(t testing.TB) io.Writer { return logWriter{t} }

// Logger returns a slog text logger that writes through LogWriter.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(LogWriter(t), nil))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
