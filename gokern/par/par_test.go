package par

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestThreadsFromEnv(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"1", 1, false},
		{" 7 ", 7, false},
		{"0", 0, true},
		{"-2", 0, true},
		{"abc", 0, true},
		{"100000", 0, true},
	}
	for _, tc := range tests {
		got, err := threadsFromEnv(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("threadsFromEnv(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if n, err := threadsFromEnv(""); err != nil || n < 1 {
		t.Errorf("empty env: %d, %v", n, err)
	}
}

func TestSetThreads(t *testing.T) {
	old := Threads()
	defer SetThreads(old)
	for _, bad := range []int{0, -1, MaxThreads + 1} {
		if err := SetThreads(bad); err == nil {
			t.Errorf("SetThreads(%d) accepted", bad)
		}
	}
	if err := SetThreads(3); err != nil || Threads() != 3 {
		t.Fatalf("SetThreads(3): %v, Threads()=%d", err, Threads())
	}
}

func TestForCoversRangeOnce(t *testing.T) {
	old := Threads()
	defer SetThreads(old)
	for _, th := range []int{1, 2, 3, 8} {
		SetThreads(th)
		for _, tc := range []struct{ n, min int }{{0, 1}, {1, 1}, {5, 1}, {17, 4}, {1000, 7}, {3, 100}} {
			hits := make([]int32, tc.n)
			var calls atomic.Int32
			For(tc.n, tc.min, func(lo, hi int) {
				calls.Add(1)
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("threads=%d n=%d min=%d: index %d hit %d times", th, tc.n, tc.min, i, h)
				}
			}
			if int(calls.Load()) > th {
				t.Fatalf("threads=%d: %d chunks", th, calls.Load())
			}
		}
	}
}

func TestForPropagatesWorkerPanic(t *testing.T) {
	old := Threads()
	defer SetThreads(old)
	SetThreads(4)
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "boom") {
			t.Fatalf("recovered %v, want the worker's panic", r)
		}
	}()
	For(100, 1, func(lo, hi int) {
		if lo > 0 {
			panic("boom")
		}
	})
	t.Fatal("For returned normally")
}

// TestChunksWork: chunks keep MinWork of work each where the total allows,
// never more than ChunksPerThread chunks per thread, and MinWork 1 splits
// into that many where there are enough items.
func TestChunksWork(t *testing.T) {
	oldT := Threads()
	defer func() { _ = SetThreads(oldT) }()
	oldW := SetMinWork(1000)
	defer SetMinWork(oldW)
	for _, c := range []struct{ threads, minWork, n, item, want int }{
		{2, 1000, 10, 10, 1},                      // 100 of work: one chunk
		{2, 1000, 10, 200, 2},                     // 2000: two chunks of 1000
		{4, 1000, 10, 150, 2},                     // 1500: 7 items a chunk at least
		{4, 1000, 100, 1000, 4 * ChunksPerThread}, // plenty: ChunksPerThread per thread
		{3, 1, 5, 1, 5},                           // MinWork 1: one item each
		{3, 1, 50, 1, 3 * ChunksPerThread},
		{2, 1000, 10, 0, 1}, // no work given: one chunk
		{2, 1000, 0, 5, 1},  // no items
	} {
		_ = SetThreads(c.threads)
		SetMinWork(c.minWork)
		b := ChunksWork(c.n, c.item)
		if got := len(b) - 1; got != c.want || b[0] != 0 || b[len(b)-1] != max(c.n, 0) {
			t.Errorf("%+v: bounds %v, want %d chunks over [0, %d)", c, b, c.want, c.n)
		}
	}
	if SetMinWork(0); MinWork() != 1 {
		t.Errorf("SetMinWork(0): MinWork() = %d, want 1", MinWork())
	}
}

// TestRunPool: every chunk runs exactly once whether the pool's workers are
// spinning, parked (after a pause longer than spinFor), busy with another
// Run (concurrent callers fall back to goroutines) or called from inside a
// chunk (nested Run), and the pool keeps working after a worker's panic.
func TestRunPool(t *testing.T) {
	old := Threads()
	defer SetThreads(old)
	SetThreads(4)
	check := func(name string, n int) {
		t.Helper()
		hits := make([]int32, n)
		b := Chunks(n, 1)
		if n%2 == 1 { // one item a chunk: more chunks than threads
			b = make([]int, n+1)
			for i := range b {
				b[i] = i
			}
		}
		Run(b, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&hits[i], 1)
			}
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("%s: index %d hit %d times", name, i, h)
			}
		}
	}
	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"back to back", func() {
			for range 200 {
				check("back to back", 37)
			}
		}},
		{"after the workers parked", func() {
			for range 3 {
				time.Sleep(2 * spinFor)
				check("after park", 11)
			}
		}},
		{"concurrent callers", func() {
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						check("concurrent", 23)
					}
				}()
			}
			wg.Wait()
		}},
		{"a slow chunk", func() { // the others take the rest meanwhile
			var byOthers atomic.Int32
			b := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
			Run(b, func(i, _, _ int) {
				if i == 0 {
					time.Sleep(20 * time.Millisecond)
					return
				}
				byOthers.Add(1)
			})
			if byOthers.Load() != 11 {
				t.Fatalf("a slow chunk: %d other chunks ran, want 11", byOthers.Load())
			}
		}},
		{"nested", func() {
			var total atomic.Int32
			Run(Chunks(4, 1), func(_, lo, hi int) {
				Run(Chunks(8, 1), func(_, lo, hi int) { total.Add(int32(hi - lo)) })
			})
			if total.Load() != 32 {
				t.Fatalf("nested: %d inner items, want 32", total.Load())
			}
		}},
		{"one processor, a locked caller", func() {
			// Run's caller spins without yielding (a cgo callback is locked
			// to its thread): with more threads than processors the chunks
			// must still all run, and the wait end within spinFor of them.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := time.Now()
			for range 200 {
				check("one processor", 37)
			}
			if d := time.Since(start); d > 200*(spinFor+time.Millisecond) {
				t.Fatalf("one processor: 200 runs took %v", d)
			}
		}},
		{"after a panic", func() {
			func() {
				defer func() { _ = recover() }()
				Run(Chunks(4, 1), func(i, _, _ int) {
					if i == 2 {
						panic("boom")
					}
				})
			}()
			check("after panic", 9)
		}},
	} {
		tc.run()
	}
}
