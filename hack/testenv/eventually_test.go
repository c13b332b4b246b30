package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalTB records Fatalf and stops the caller with a panic the test
// recovers, standing in for t.Fatalf's runtime.Goexit.
type fatalTB struct {
	testing.TB
	msg string
}

type fatal struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatal{})
}

// failure runs fn against a fatalTB and returns its Fatalf message ("" if none).
func failure(fn func(tb testing.TB)) (msg string) {
	tb := &fatalTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				panic(r)
			}
			msg = tb.msg
		}
	}()
	fn(tb)
	return ""
}

func TestEventually_Conditions(t *testing.T) {
	n := 0
	Eventually(t, 5*time.Second, "third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("func() bool polled %d times, want 3", n)
	}
	n = 0
	Eventually(t, 5*time.Second, "third call", func() error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Errorf("func() error polled %d times, want 3", n)
	}
	n = 0
	took := Eventually(t, 5*time.Second, "third call", func() (bool, error) { n++; return n == 3, nil })
	if n != 3 || took <= 0 {
		t.Errorf("func() (bool, error) polled %d times in %v, want 3 in > 0", n, took)
	}
}

func TestEventually_TimeoutReportsLastError(t *testing.T) {
	msg := failure(func(tb testing.TB) {
		Eventually(tb, 30*time.Millisecond, "the moon", func() error { return errors.New("still night") })
	})
	for _, want := range []string{"timed out after 30ms waiting for the moon", "last error: still night"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q lacks %q", msg, want)
		}
	}
	msg = failure(func(tb testing.TB) {
		Eventually(tb, 30*time.Millisecond, "the sun", func() bool { return false })
	})
	if want := "timed out after 30ms waiting for the sun"; msg != want {
		t.Errorf("failure = %q, want %q", msg, want)
	}
}

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			fmt.Fprint(&b, "x")
		}
	}()
	Eventually(t, 5*time.Second, "100 writes", func() bool { return len(b.String()) == 100 })
	<-done
}
