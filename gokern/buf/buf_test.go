package buf

import "testing"

// TestList: buffers come back after Put, oversized ones and ones past
// MaxCount are not kept, and Sized grows a short buffer.
func TestList(t *testing.T) {
	for _, tc := range []struct {
		name         string
		maxCap, maxN int
		put          []int // capacities put back, in order
		wantKept     int
	}{
		{"keeps", 100, 4, []int{10, 20}, 2},
		{"too big", 100, 4, []int{10, 200}, 1},
		{"too many", 100, 2, []int{1, 2, 3}, 2},
		{"zero value keeps nothing", 0, 0, []int{0, 5}, 0},
	} {
		l := &List[byte]{MaxCap: tc.maxCap, MaxCount: tc.maxN}
		for _, c := range tc.put {
			b := make([]byte, 0, c)
			l.Put(&b)
		}
		if len(l.free) != tc.wantKept {
			t.Errorf("%s: %d kept, want %d", tc.name, len(l.free), tc.wantKept)
		}
	}
	l := &List[int32]{MaxCap: 1 << 10, MaxCount: 1}
	s, h := l.Sized(8)
	s[7] = 42
	l.Put(h)
	if s2, _ := l.Sized(8); len(s2) != 8 || s2[7] != 42 {
		t.Errorf("Sized(8) after Put: %v, want the kept buffer", s2)
	}
	if s3, _ := l.Sized(100); len(s3) != 100 {
		t.Errorf("Sized(100) = %d elements", len(s3))
	}
}
