package buf

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// TestCache: a value comes back only for equal bytes under its key, the
// least recently used goes first past MaxBytes, values too big for half
// the budget and failed builds are not kept, and the zero value keeps
// nothing.
func TestCache(t *testing.T) {
	type step struct {
		key, src  string
		size      int
		fail      bool
		wantBuilt bool // build ran
		wantKeys  int  // values kept afterwards
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"hit", 100, []step{{"a", "xy", 10, false, true, 1}, {"a", "xy", 10, false, false, 1}}},
		{"bytes changed", 100, []step{{"a", "xy", 10, false, true, 1}, {"a", "xz", 10, false, true, 1}, {"a", "xz", 10, false, false, 1}}},
		{"other key", 100, []step{{"a", "xy", 10, false, true, 1}, {"b", "xy", 10, false, true, 2}}},
		{"lru evicted", 40, []step{
			{"a", "1", 14, false, true, 1}, {"b", "2", 14, false, true, 2}, {"a", "1", 14, false, false, 2},
			{"c", "3", 14, false, true, 2}, // b was least recently used
			{"a", "1", 14, false, false, 2}, {"b", "2", 14, false, true, 2},
		}},
		{"too big", 40, []step{{"a", "1", 20, false, true, 0}, {"a", "1", 20, false, true, 0}}},
		{"build fails", 100, []step{{"a", "1", 5, true, true, 0}, {"a", "1", 5, false, true, 1}}},
		{"zero value", 0, []step{{"a", "1", 0, false, true, 0}, {"a", "1", 0, false, true, 0}}},
	} {
		c := &Cache[string, int]{MaxBytes: tc.max}
		for i, s := range tc.steps {
			built := false
			v, err := c.Get(s.key, []byte(s.src), func(src []byte) (int, int, error) {
				if string(src) != s.src {
					t.Fatalf("%s step %d: build got %q, want %q", tc.name, i, src, s.src)
				}
				built = true
				if s.fail {
					return 0, 0, errors.New("no")
				}
				return len(s.src) * 1000, s.size, nil
			})
			if (err != nil) != s.fail || (err == nil && v != len(s.src)*1000) {
				t.Errorf("%s step %d: %v, %v", tc.name, i, v, err)
			}
			if built != s.wantBuilt {
				t.Errorf("%s step %d: built %v, want %v", tc.name, i, built, s.wantBuilt)
			}
			if n, size := c.Len(); n != s.wantKeys || size > max(tc.max, 0) {
				t.Errorf("%s step %d: %d values (%d bytes) kept, want %d (at most %d bytes)", tc.name, i, n, size, s.wantKeys, tc.max)
			}
		}
		c.Clear()
		if n, size := c.Len(); n != 0 || size != 0 {
			t.Errorf("%s: Clear left %d values, %d bytes", tc.name, n, size)
		}
	}
}

// cacheOrder returns c's keys from the most to the least recently used,
// after checking that the list, the map and the size agree.
func cacheOrder[K comparable, V any](t testing.TB, c *Cache[K, V]) []K {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []K
	size := 0
	var prev *cached[K, V]
	for e := c.front; e != nil; prev, e = e, e.next {
		if e.prev != prev || !e.kept || c.m[e.key] != e {
			t.Fatalf("list broken at %v (prev %p, want %p; kept %v; in map %v)", e.key, e.prev, prev, e.kept, c.m[e.key] == e)
		}
		keys = append(keys, e.key)
		size += e.size
		if len(keys) > len(c.m) {
			t.Fatalf("list longer than the map (%d values)", len(c.m))
		}
	}
	if c.back != prev || len(keys) != len(c.m) || size != c.size {
		t.Fatalf("list of %d values (%d bytes, back %v), map of %d (%d bytes)", len(keys), size, c.back == prev, len(c.m), c.size)
	}
	if c.size > max(c.MaxBytes, 0) {
		t.Fatalf("%d bytes kept, at most %d", c.size, c.MaxBytes)
	}
	return keys
}

// getString gets key's value (built from src, of size bytes) from c and
// reports whether build ran; the value is src itself.
func getString(t testing.TB, c *Cache[string, string], key, src string, size int) bool {
	t.Helper()
	built := false
	v, err := c.Get(key, []byte(src), func(b []byte) (string, int, error) {
		built = true
		return string(b), size, nil
	})
	if err != nil || v != src {
		t.Fatalf("Get(%q, %q) = %q, %v", key, src, v, err)
	}
	return built
}

// TestCacheLRU: values are dropped least recently used first, a hit makes
// its value the most recently used, a key kept again with other bytes
// replaces its value (and its size), and a large value drops as many as it
// takes.
func TestCacheLRU(t *testing.T) {
	type step struct {
		key, src  string
		size      int    // of the value built
		wantBuilt bool   // build ran
		wantOrder string // keys kept afterwards, most recently used first
		wantSize  int    // bytes kept afterwards
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"inserts go in front", 100, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"c", "3", 9, true, "cba", 30},
		}},
		{"oldest evicted first", 30, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"c", "3", 9, true, "cba", 30},
			{"d", "4", 9, true, "dcb", 30}, {"e", "5", 9, true, "edc", 30}, {"a", "1", 9, true, "aed", 30},
		}},
		{"hits refresh recency", 30, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"c", "3", 9, true, "cba", 30},
			{"a", "1", 9, false, "acb", 30}, {"c", "3", 9, false, "cab", 30}, {"c", "3", 9, false, "cab", 30},
			{"d", "4", 9, true, "dca", 30}, // b was least recently used
			{"a", "1", 9, false, "adc", 30}, {"e", "5", 9, true, "ead", 30},
		}},
		{"hit at the back", 30, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"a", "1", 9, false, "ab", 20},
			{"b", "2", 9, false, "ba", 20}, {"c", "3", 9, true, "cba", 30}, {"a", "1", 9, false, "acb", 30},
		}},
		{"key replaced", 40, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20},
			{"a", "x", 14, true, "ab", 25}, // the old value's 10 bytes no longer count
			{"a", "1", 4, true, "ab", 15}, {"c", "3", 9, true, "cab", 25}, {"b", "y", 19, true, "bca", 35},
			{"b", "yy", 18, true, "bca", 35}, {"d", "4", 9, true, "dbc", 40}, // a dropped, not c
		}},
		{"replaced at the back", 30, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"a", "x", 9, true, "ab", 20},
			{"c", "3", 9, true, "cab", 30}, {"d", "4", 9, true, "dca", 30},
		}},
		{"large value drops several", 40, []step{
			{"a", "1", 4, true, "a", 5}, {"b", "2", 4, true, "ba", 10}, {"c", "3", 9, true, "cba", 20},
			{"d", "4", 9, true, "dcba", 30}, {"e", "5", 19, true, "edc", 40}, {"f", "6", 0, true, "fed", 31},
		}},
		{"exactly full", 20, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 9, true, "ba", 20}, {"b", "2", 9, false, "ba", 20},
			{"c", "3", 9, true, "cb", 20}, {"d", "", 9, true, "dc", 19},
		}},
		{"too big not kept, nothing dropped", 20, []step{
			{"a", "1", 9, true, "a", 10}, {"b", "2", 10, true, "a", 10}, {"b", "22222222222", 0, true, "a", 10},
		}},
		{"two values fill it", 4, []step{
			{"a", "1", 1, true, "a", 2}, {"b", "2", 1, true, "ba", 4}, {"c", "3", 1, true, "cb", 4},
			{"b", "2", 1, false, "bc", 4}, {"a", "1", 1, true, "ab", 4},
		}},
		{"zero value, empty bytes", 0, []step{{"a", "", 0, true, "", 0}, {"a", "", 0, true, "", 0}}},
		{"negative MaxBytes", -10, []step{{"a", "", 0, true, "", 0}, {"a", "1", 0, true, "", 0}}},
	} {
		c := &Cache[string, string]{MaxBytes: tc.max}
		for i, s := range tc.steps {
			if built := getString(t, c, s.key, s.src, s.size); built != s.wantBuilt {
				t.Errorf("%s step %d (%s): built %v, want %v", tc.name, i, s.key, built, s.wantBuilt)
			}
			order := strings.Join(cacheOrder(t, c), "")
			if _, size := c.Len(); order != s.wantOrder || size != s.wantSize {
				t.Errorf("%s step %d (%s): kept %q (%d bytes), want %q (%d bytes)", tc.name, i, s.key, order, size, s.wantOrder, s.wantSize)
			}
		}
		c.Clear()
		if order := cacheOrder(t, c); len(order) != 0 {
			t.Errorf("%s: Clear left %v", tc.name, order)
		}
		getString(t, c, "z", "1", 0) // usable after Clear
		if n, _ := c.Len(); tc.max >= 2 && n != 1 {
			t.Errorf("%s: %d values kept after Clear and one Get, want 1", tc.name, n)
		}
	}
}

// TestCacheAccounting: many inserts, hits, replacements and evictions keep
// the order and the size of a plain model (a slice in recency order).
func TestCacheAccounting(t *testing.T) {
	type entry struct {
		key, src string
		size     int
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, maxBytes := range []int{1, 64, 1000, 1 << 14} {
		c := &Cache[string, string]{MaxBytes: maxBytes}
		var model []entry // most recently used first
		for i := range 20000 {
			key := strconv.Itoa(rng.IntN(300))
			src := strconv.Itoa(rng.IntN(3)) // the same bytes often: hits
			size := rng.IntN(maxBytes/8 + 2)
			j := slices.IndexFunc(model, func(e entry) bool { return e.key == key })
			wantBuilt := j < 0 || model[j].src != src
			if built := getString(t, c, key, src, size); built != wantBuilt {
				t.Fatalf("max %d, get %d (%s): built %v, want %v", maxBytes, i, key, built, wantBuilt)
			}
			kept := entry{key, src, len(src) + size}
			if !wantBuilt {
				kept = model[j]
			}
			if kept.size <= maxBytes/2 { // else not kept, and the old value (if any) stays where it was
				if j >= 0 {
					model = slices.Delete(model, j, j+1)
				}
				model = slices.Insert(model, 0, kept)
			}
			total := 0
			for _, e := range model {
				total += e.size
			}
			for total > maxBytes {
				total -= model[len(model)-1].size
				model = model[:len(model)-1]
			}
			order := cacheOrder(t, c)
			if n, size := c.Len(); n != len(model) || size != total || len(order) != len(model) {
				t.Fatalf("max %d, get %d: %d values (%d bytes) kept, want %d (%d bytes)", maxBytes, i, n, size, len(model), total)
			}
			for k, e := range model {
				if order[k] != e.key {
					t.Fatalf("max %d, get %d: order %v, want %v", maxBytes, i, order, model)
				}
			}
		}
	}
}

// TestCacheCopy: build gets a copy of the bytes, and what is kept is
// compared with that copy, not with the caller's bytes changed meanwhile.
func TestCacheCopy(t *testing.T) {
	c := &Cache[string, string]{MaxBytes: 100}
	src := []byte("abc")
	v, _ := c.Get("a", src, func(b []byte) (string, int, error) {
		src[0] = 'x' // the caller's bytes change during the build
		return string(b), 0, nil
	})
	if v != "abc" {
		t.Fatalf("built from %q, want %q", v, "abc")
	}
	if !getString(t, c, "a", "xbc", 0) {
		t.Error(`"xbc" hit the value derived from "abc"`)
	}
	if getString(t, c, "a", "xbc", 0) {
		t.Error(`"xbc" kept, not hit`)
	}
}

// errTestInterrupt stands for the kernels' interrupt sentinel.
var errTestInterrupt = errors.New("interrupted")

// TestCachePanic: a build that panics (as the kernels do when interrupted)
// leaves nothing kept, the values kept as they were, and the cache
// unlocked and usable; the panic reaches Get's caller.
func TestCachePanic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max      int
		key, src string
		prior    bool // values kept before: "a" (bytes "1") and "b"
	}{
		{"new key", 100, "n", "1", false},
		{"new key, others kept", 100, "n", "1", true},
		{"replacing a key", 100, "a", "2", true},
		{"too big to keep", 4, "a", "12345", true},
		{"zero value", 0, "a", "1", false},
	} {
		c := &Cache[string, string]{MaxBytes: tc.max}
		if tc.prior {
			getString(t, c, "b", "1", 0)
			getString(t, c, "a", "1", 0)
		}
		before := cacheOrder(t, c)
		_, sizeBefore := c.Len()
		func() {
			defer func() {
				if r := recover(); r != errTestInterrupt {
					t.Errorf("%s: recovered %v, want the build's panic", tc.name, r)
				}
			}()
			c.Get(tc.key, []byte(tc.src), func([]byte) (string, int, error) { panic(errTestInterrupt) })
			t.Errorf("%s: Get returned", tc.name)
		}()
		if !c.mu.TryLock() {
			t.Fatalf("%s: the lock is held after the panic", tc.name)
		}
		c.mu.Unlock()
		after := cacheOrder(t, c)
		if _, size := c.Len(); !slices.Equal(after, before) || size != sizeBefore {
			t.Errorf("%s: kept %v (%d bytes) after the panic, %v (%d bytes) before", tc.name, after, size, before, sizeBefore)
		}
		if tc.prior && getString(t, c, "a", "1", 0) {
			t.Errorf("%s: the value kept before the panic was not hit", tc.name)
		}
		getString(t, c, "c", "3", 0)
		if n, _ := c.Len(); tc.max > 0 && n != len(before)+1 {
			t.Errorf("%s: %d values kept after one more, want %d", tc.name, n, len(before)+1)
		}
	}
}

// TestCacheConcurrent: goroutines getting, failing, panicking, clearing and
// counting at once (run with -race) each get values derived from their own
// bytes, and the cache stays consistent.
func TestCacheConcurrent(t *testing.T) {
	c := &Cache[int, string]{MaxBytes: 2000}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 4000 {
				key := rng.IntN(100)
				src := []byte(strconv.Itoa(key*10 + rng.IntN(2)))
				want := string(src)
				switch r := rng.IntN(100); {
				case r == 0 && g == 0:
					c.Clear()
				case r < 3:
					c.Len()
				case r < 6:
					_, err := c.Get(key, src, func([]byte) (string, int, error) { return "", 0, errors.New("no") })
					if err == nil {
						// a hit: the value kept is for equal bytes (or,
						// dropped by another goroutine meanwhile, rebuilt)
						v, _ := c.Get(key, src, func(b []byte) (string, int, error) { return string(b), 1, nil })
						if v != want {
							t.Errorf("goroutine %d get %d: %q, want %q", g, i, v, want)
						}
					}
				case r < 8:
					func() {
						defer func() { recover() }()
						c.Get(key, src, func([]byte) (string, int, error) { panic(errTestInterrupt) })
					}()
				default:
					v, err := c.Get(key, src, func(b []byte) (string, int, error) {
						return string(b), rng.IntN(100), nil
					})
					if err != nil || v != want {
						t.Errorf("goroutine %d get %d: %q, %v, want %q", g, i, v, err, want)
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("goroutines stuck (a lock held?)")
	}
	cacheOrder(t, c)
}

// fullCache returns a cache holding entries values of size bytes each
// (their 8 bytes of source included), and the source and build that made
// them.
func fullCache(entries, size int) (*Cache[int, int], []byte, func([]byte) (int, int, error)) {
	c := &Cache[int, int]{MaxBytes: entries * size}
	src := make([]byte, 8)
	build := func([]byte) (int, int, error) { return 0, size - len(src), nil }
	for i := range entries {
		c.Get(i, src, build)
	}
	return c, src, build
}

// BenchmarkCacheEvict: a miss that keeps its value and drops the least
// recently used, with entries values kept: the cost does not depend on
// entries.
func BenchmarkCacheEvict(b *testing.B) {
	const size = 100 // bytes per value, its 8 bytes of source included
	for _, entries := range []int{100, 40000} {
		b.Run("entries="+strconv.Itoa(entries), func(b *testing.B) {
			c, src, build := fullCache(entries, size)
			key := entries
			for b.Loop() {
				c.Get(key, src, build)
				key++
			}
			if n, _ := c.Len(); n != entries {
				b.Fatalf("%d values kept, want %d", n, entries)
			}
		})
	}
}

// BenchmarkCacheHit: a hit (bytes compared, value made the most recently
// used) among entries values kept.
func BenchmarkCacheHit(b *testing.B) {
	const size = 100
	for _, entries := range []int{100, 40000} {
		b.Run("entries="+strconv.Itoa(entries), func(b *testing.B) {
			c, src, build := fullCache(entries, size)
			key := 0
			for b.Loop() {
				c.Get(key, src, build) // the least recently used: a hit moves it from the back
				if key++; key == entries {
					key = 0
				}
			}
			if n, _ := c.Len(); n != entries {
				b.Fatalf("%d values kept, want %d", n, entries)
			}
		})
	}
}

// TestCacheParts: GetParts compares the kept bytes with the parts'
// concatenation (however the bytes are split), builds from the joined
// bytes, and a change in any part is a miss; a value too big to keep is
// built from the joined bytes too.
func TestCacheParts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int
		first     []string
		then      []string
		wantBuilt bool
	}{
		{"same parts", 100, []string{"ab", "cd"}, []string{"ab", "cd"}, false},
		{"split elsewhere", 100, []string{"ab", "cd"}, []string{"a", "bcd"}, false},
		{"one part", 100, []string{"abcd"}, []string{"ab", "cd"}, false},
		{"second part changed", 100, []string{"ab", "cd"}, []string{"ab", "ce"}, true},
		{"first part changed", 100, []string{"ab", "cd"}, []string{"xb", "cd"}, true},
		{"longer", 100, []string{"ab", "cd"}, []string{"ab", "cde"}, true},
		{"shorter", 100, []string{"ab", "cd"}, []string{"ab", "c"}, true},
		{"empty part", 100, []string{"ab", "", "cd"}, []string{"abcd"}, false},
		{"too big", 8, []string{"ab", "cd"}, []string{"ab", "cd"}, true},
	} {
		c := Cache[string, string]{MaxBytes: tc.max}
		parts := func(ss []string) [][]byte {
			out := make([][]byte, len(ss))
			for i, s := range ss {
				out[i] = []byte(s)
			}
			return out
		}
		get := func(ss []string) (string, bool) {
			built := false
			v, err := c.GetParts("k", parts(ss), func(src []byte) (string, int, error) {
				built = true
				return string(src), 1, nil
			})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			return v, built
		}
		if v, built := get(tc.first); !built || v != strings.Join(tc.first, "") {
			t.Errorf("%s: first call built %v value %q", tc.name, built, v)
		}
		v, built := get(tc.then)
		if built != tc.wantBuilt {
			t.Errorf("%s: second call built %v, want %v", tc.name, built, tc.wantBuilt)
		}
		if want := strings.Join(tc.then, ""); v != want {
			t.Errorf("%s: second value %q, want %q", tc.name, v, want)
		}
	}
}

// TestCacheKept: GetKept finds a value by its key alone (other bytes under
// the key still get it: the caller promised they never differ), keeps no
// copy (only the value's size counts), and shares Get's budget, eviction
// order and rules for values too big or failed builds.
func TestCacheKept(t *testing.T) {
	type step struct {
		key, src  string
		size      int
		fail      bool
		wantVal   string // the value returned (build's is its src)
		wantBuilt bool
		wantKeys  int
		wantBytes int
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"hit by key", 100, []step{{"a", "xy", 10, false, "xy", true, 1, 10}, {"a", "xy", 10, false, "xy", false, 1, 10}}},
		{"no comparison", 100, []step{{"a", "xy", 10, false, "xy", true, 1, 10}, {"a", "zz", 10, false, "xy", false, 1, 10}}},
		{"other key", 100, []step{{"a", "xy", 10, false, "xy", true, 1, 10}, {"b", "xy", 12, false, "xy", true, 2, 22}}},
		{"no copy counted", 20, []step{{"a", "a long string of bytes", 10, false, "a long string of bytes", true, 1, 10}}},
		{"lru evicted", 40, []step{
			{"a", "1", 14, false, "1", true, 1, 14}, {"b", "2", 14, false, "2", true, 2, 28}, {"a", "1", 14, false, "1", false, 2, 28},
			{"c", "3", 14, false, "3", true, 2, 28}, // b was least recently used
			{"b", "2", 14, false, "2", true, 2, 28},
		}},
		{"too big", 40, []step{{"a", "1", 21, false, "1", true, 0, 0}, {"a", "1", 20, false, "1", true, 1, 20}}},
		{"build fails", 100, []step{{"a", "1", 5, true, "", true, 0, 0}, {"a", "1", 5, false, "1", true, 1, 5}}},
		{"zero value", 0, []step{{"a", "1", 0, false, "1", true, 0, 0}, {"a", "1", 0, false, "1", true, 0, 0}}},
	} {
		c := &Cache[string, string]{MaxBytes: tc.max}
		for i, s := range tc.steps {
			built := false
			v, err := c.GetKept(s.key, []byte(s.src), func(src []byte) (string, int, error) {
				built = true
				if s.fail {
					return "", 0, errors.New("no")
				}
				return string(src), s.size, nil
			})
			if (err != nil) != s.fail || v != s.wantVal {
				t.Errorf("%s step %d: %q, %v; want %q", tc.name, i, v, err, s.wantVal)
			}
			if built != s.wantBuilt {
				t.Errorf("%s step %d: built %v, want %v", tc.name, i, built, s.wantBuilt)
			}
			cacheOrder(t, c)
			if n, size := c.Len(); n != s.wantKeys || size != s.wantBytes {
				t.Errorf("%s step %d: %d values (%d bytes) kept, want %d (%d bytes)", tc.name, i, n, size, s.wantKeys, s.wantBytes)
			}
		}
	}
}

// TestEqualThreads: equal (the comparison of a hit) gives bytes.Equal's
// answer on strings long enough to be split over threads, for a difference
// in the first, a middle or the last byte, in every chunk, or none.
func TestEqualThreads(t *testing.T) {
	defer par.SetThreads(par.Threads())
	r := rand.New(rand.NewPCG(3, 4))
	n := 5*equalMinChunk + 12345
	a := make([]byte, n)
	for i := range a {
		a[i] = byte(r.Uint32())
	}
	for _, threads := range []int{1, 2, 3} {
		if err := par.SetThreads(threads); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			at   int // the byte changed, -1: none
			cut  int // b is this much shorter
		}{
			{"equal", -1, 0}, {"first byte", 0, 0}, {"middle", n / 2, 0}, {"chunk edge", equalMinChunk, 0},
			{"last byte", n - 1, 0}, {"shorter", -1, 1}, {"short strings", -1, n - 100},
		} {
			b := slices.Clone(a[:n-tc.cut])
			if tc.at >= 0 {
				b[tc.at] ^= 1
			}
			want := tc.at < 0 && tc.cut == 0
			x := a
			if tc.name == "short strings" {
				x, want = a[:len(b)], true
			}
			if got := equal(x, b); got != want {
				t.Errorf("%d threads, %s: equal = %v, want %v", threads, tc.name, got, want)
			}
			if got := equalParts(b, [][]byte{x[:len(x)/3], x[len(x)/3:]}); got != want {
				t.Errorf("%d threads, %s: equalParts = %v, want %v", threads, tc.name, got, want)
			}
		}
	}
}
