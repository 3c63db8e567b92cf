package par

import (
	"sync/atomic"
	"testing"
	"time"
)

// interrupted runs fn between Begin and End with c as the SIGINT counter and
// reports whether it panicked with ErrInterrupted (any other panic fails).
func interrupted(t *testing.T, c *uint32, fn func()) (got bool) {
	t.Helper()
	SetInterruptCounter(c)
	defer SetInterruptCounter(nil)
	Begin()
	defer End()
	defer func() {
		r := recover()
		if r != nil && r != ErrInterrupted {
			t.Fatalf("panic %v, want ErrInterrupted", r)
		}
		got = r == ErrInterrupted
	}()
	fn()
	return false
}

func TestInterrupt(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(4)
	tests := []struct {
		name string
		// before: SIGINTs counted before Begin (forgotten); during: after
		// how many chunks run a SIGINT arrives (-1: none)
		before, chunks, during int
		want                   bool
	}{
		{"no signal", 0, 64, -1, false},
		{"signal before the call is forgotten", 3, 64, -1, false},
		{"signal in the first chunk", 0, 64, 0, true},
		{"signal midway", 0, 64, 20, true},
		{"single chunk", 0, 1, 0, true},
		{"signal in the last chunk", 0, 8, 7, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c uint32
			atomic.AddUint32(&c, uint32(tc.before))
			var ran atomic.Int32
			b := make([]int, tc.chunks+1)
			for i := range b {
				b[i] = i
			}
			got := interrupted(t, &c, func() {
				Run(b, func(i, _, _ int) {
					if int(ran.Add(1))-1 == tc.during {
						atomic.AddUint32(&c, 1)
					}
					time.Sleep(100 * time.Microsecond)
				})
			})
			if got != tc.want {
				t.Fatalf("interrupted = %v, want %v", got, tc.want)
			}
			if tc.want && tc.during+1 < tc.chunks && int(ran.Load()) >= tc.chunks {
				t.Errorf("all %d chunks ran after the signal in chunk %d", tc.chunks, tc.during)
			}
			if !tc.want && int(ran.Load()) != tc.chunks {
				t.Errorf("%d of %d chunks ran", ran.Load(), tc.chunks)
			}
		})
	}
}

func TestInterruptNested(t *testing.T) {
	var c uint32
	got := interrupted(t, &c, func() {
		Run([]int{0, 1, 2, 3, 4}, func(i, _, _ int) {
			Run([]int{0, 1, 2}, func(j, _, _ int) {
				if i == 1 && j == 1 {
					atomic.AddUint32(&c, 1)
				}
			})
		})
	})
	if !got {
		t.Fatal("a nested Run's interrupt did not reach the caller as ErrInterrupted")
	}
}

func TestStoppedNeedsACallInFlight(t *testing.T) {
	var c uint32
	SetInterruptCounter(&c)
	defer SetInterruptCounter(nil)
	atomic.AddUint32(&c, 1)
	if Stopped() {
		t.Fatal("Stopped with no call in flight")
	}
	Begin()
	if Stopped() {
		t.Fatal("a SIGINT from before Begin stops the call")
	}
	Begin() // a second call in flight keeps the first one's base
	atomic.AddUint32(&c, 1)
	if !Stopped() {
		t.Fatal("not Stopped after a SIGINT during the calls")
	}
	End()
	End()
	if Stopped() {
		t.Fatal("Stopped after every call ended")
	}
	Begin() // the next busy period starts afresh
	defer End()
	if Stopped() {
		t.Fatal("Stopped at the start of a new call")
	}
}
