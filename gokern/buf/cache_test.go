package buf

import (
	"errors"
	"testing"
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
