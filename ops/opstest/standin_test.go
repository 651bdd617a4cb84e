package opstest_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// standInT stands in for a test's *testing.T where there is none: in an
// Example, and to watch New fail without failing the test that watches. It
// has the methods opstest and the README's test call; any other panics (its
// embedded interface is nil).
type standInT struct {
	testing.TB
	log    io.Writer // where Log writes
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	messages []string
}

func (t *standInT) Helper()                  {}
func (t *standInT) Parallel()                {}
func (t *standInT) Name() string             { return "StandIn" }
func (t *standInT) Context() context.Context { return t.ctx }
func (t *standInT) Log(args ...any)          { fmt.Fprintln(t.log, args...) }
func (t *standInT) Logf(format string, args ...any) {
	fmt.Fprintf(t.log, format+"\n", args...)
}

func (t *standInT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *standInT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }
func (t *standInT) Error(args ...any)                 { t.fail(fmt.Sprint(args...)) }
func (t *standInT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (t *standInT) Fatal(args ...any) { t.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (t *standInT) FailNow()          { t.fail("FailNow"); runtime.Goexit() }

func (t *standInT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *standInT) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.messages = append(t.messages, msg)
}

// Messages is what the body reported through Error and Fatal.
func (t *standInT) Messages() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.messages, "\n")
}

// runTest runs body as the testing package runs a test: in a goroutine of
// its own (Fatal ends it with runtime.Goexit), then its cleanups, last
// first, after its context is cancelled.
func runTest(log io.Writer, body func(t *standInT)) *standInT {
	t := &standInT{log: log}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(t)
	}()
	<-done
	t.cancel()
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	return t
}
