// Package par holds the library's thread setting and its one parallel loop.
//
// The thread count starts from BITNET_GO_NUM_THREADS (when set to a positive
// integer) or runtime.NumCPU(), and SetThreads changes it at run time. Every
// kernel that runs goroutines goes through Run (or For), so the setting
// bounds them all and a panic in a worker reaches the caller's goroutine,
// where the C ABI recovers it, instead of killing the process. Run's chunks
// go to a pool of workers that poll between calls (pool.go).
package par

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bitnet-go/bitnet_go/gokern/envvar"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// EnvThreads is the environment variable read at start-up.
const EnvThreads = "BITNET_GO_NUM_THREADS"

// MaxThreads bounds SetThreads; more workers than this only add overhead.
const MaxThreads = 1024

var threads atomic.Int64

func init() {
	// A bad value must not stop the library from loading: envvar falls back
	// and records why (the Python layer warns once).
	threads.Store(envvar.Int(EnvThreads, int64(runtime.NumCPU()), " (the number of CPUs)", func(v string) (int64, error) {
		n, err := threadsFromEnv(v)
		return int64(n), err
	}))
}

// threadsFromEnv parses the environment value; "" means runtime.NumCPU().
func threadsFromEnv(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxThreads {
		return 0, errs.Value("%s must be an integer in [1, %d], got %q", EnvThreads, MaxThreads, v)
	}
	return n, nil
}

// Threads returns the number of worker goroutines kernels may use.
func Threads() int { return int(threads.Load()) }

// SetThreads sets the number of worker goroutines kernels may use.
func SetThreads(n int) error {
	if n < 1 || n > MaxThreads {
		return errs.Value("n (the number of threads) must be in [1, %d], got %d", MaxThreads, n)
	}
	threads.Store(int64(n))
	return nil
}

// Chunks splits [0, n) into at most Threads() contiguous chunks of at least
// minChunk items each (the last may be shorter when n < minChunk) and returns
// the chunk boundaries: chunk i is [b[i], b[i+1]).
func Chunks(n, minChunk int) []int { return chunks(n, minChunk, Threads()) }

// chunks splits [0, n) into at most most chunks of at least minChunk items.
func chunks(n, minChunk, most int) []int {
	if n <= 0 {
		return []int{0, 0}
	}
	if minChunk < 1 {
		minChunk = 1
	}
	k := max(most, 1)
	if fit := (n + minChunk - 1) / minChunk; k > fit {
		k = fit
	}
	b := make([]int, k+1)
	for i := 0; i <= k; i++ {
		b[i] = int(int64(n) * int64(i) / int64(k))
	}
	return b
}

// DefaultMinWork is MinWork's setting: the least work (multiply-adds, or
// elements for a pass over memory) worth a chunk of its own. Waking an idle
// thread costs tens of microseconds (54 us measured after 1 ms idle on a
// 2-vCPU VM), so smaller pieces run faster on fewer threads.
const DefaultMinWork = 1 << 20

var minWork atomic.Int64

func init() { minWork.Store(DefaultMinWork) }

// MinWork returns the least work ChunksWork gives a chunk.
func MinWork() int { return int(minWork.Load()) }

// SetMinWork sets MinWork (n >= 1) and returns the old value: tests set 1 to
// split small shapes over every thread.
func SetMinWork(n int) int { return int(minWork.Swap(int64(max(n, 1)))) }

// ChunksWork is Chunks for n items of itemWork work each, for kernels whose
// chunks are independent: every chunk gets at least MinWork() of work where
// n*itemWork allows, and there are up to ChunksPerThread chunks per thread,
// so that Run's threads, which take chunks as they free up, even out a
// thread that runs late (on a shared VM a vCPU is often held up for a
// while).
func ChunksWork(n, itemWork int) []int {
	w, iw := MinWork(), max(itemWork, 1)
	return chunks(n, (w+iw-1)/iw, ChunksPerThread*Threads())
}

// ChunksPerThread is the most chunks per thread ChunksWork makes.
const ChunksPerThread = 4

// For runs fn over [0, n) split as Chunks(n, minChunk) splits it; see Run.
func For(n, minChunk int, fn func(lo, hi int)) {
	Run(Chunks(n, minChunk), func(_, lo, hi int) { fn(lo, hi) })
}

// Run calls fn(i, bounds[i], bounds[i+1]) once for every chunk i and
// returns when all are done. The caller's goroutine and up to Threads()-1 of
// the pool's workers (see pool.go; fresh goroutines when the pool is busy,
// as for a Run inside a Run) take the chunks in order, each the next one
// not taken, until none is left. If any fn panics, Run panics in the
// caller's goroutine with the first panic value, after every chunk is done.
func Run(bounds []int, fn func(i, lo, hi int)) {
	k := len(bounds) - 1
	if k <= 0 {
		return
	}
	if k == 1 {
		Check()
		fn(0, bounds[0], bounds[1])
		Check()
		return
	}
	j := &job{bounds: bounds, fn: fn, k: int32(k)}
	j.left.Store(int32(k))
	j.wg.Add(k)
	helpers := min(k, Threads()) - 1
	if helpers > 0 {
		if poolMu.TryLock() {
			defer poolMu.Unlock()
			post(j, helpers)
		} else {
			for range helpers {
				go j.help()
			}
		}
	}
	j.help()
	j.wait()
	if j.failed {
		throw(j.perr)
	}
	Check()
}

// job is one Run's chunks and their completion.
type job struct {
	bounds []int
	fn     func(i, lo, hi int)
	k      int32
	next   atomic.Int32 // the next chunk to take
	left   atomic.Int32 // chunks not yet done
	wg     sync.WaitGroup
	once   sync.Once
	perr   any
	failed bool
}

// help runs the chunks not yet taken, one at a time, until none is left. A
// helper that comes late finds none and returns at once: the caller waits
// for the chunks, not for its helpers. Once the call is interrupted
// (Stopped) the chunks left are counted done without running.
func (j *job) help() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.k {
			return
		}
		if Stopped() {
			j.skip()
			continue
		}
		j.run(int(i))
	}
}

// skip counts a chunk done without running it.
func (j *job) skip() {
	j.left.Add(-1)
	j.wg.Done()
}

// run runs chunk i, recording a panic, and counts it done.
func (j *job) run(i int) {
	defer j.finish()
	j.fn(i, j.bounds[i], j.bounds[i+1])
}

// finish records a panic (deferred directly: recover works only there) and
// counts the chunk done.
func (j *job) finish() {
	j.record(recover())
	j.left.Add(-1)
	j.wg.Done()
}

// record keeps the first panic value r (nil: none).
func (j *job) record(r any) {
	if r != nil {
		j.once.Do(func() { j.perr, j.failed = r, true })
	}
}

// wait returns when every chunk is done: it spins for up to spinFor (the
// helpers usually finish within it), then blocks.
func (j *job) wait() {
	spin(func() bool { return j.left.Load() == 0 }, false)
	j.wg.Wait()
}

// throw re-raises a worker's panic on the caller's goroutine
// (ErrInterrupted as it is: it is no failure).
func throw(v any) {
	if v == ErrInterrupted {
		panic(v)
	}
	panic(fmt.Sprintf("panic in worker: %v", v))
}
