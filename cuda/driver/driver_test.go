package driver

import (
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

func TestSizeClass(t *testing.T) {
	for _, s := range []int64{1, 4096, 4097, 1 << 20, 1<<20 + 1, 3 << 29, 1<<30 + 1} {
		c := sizeClass(s)
		if c < s || (s > 1<<20 && float64(c) > float64(s)*1.125+1) {
			t.Fatalf("sizeClass(%d) = %d", s, c)
		}
		if sizeClass(c) != c {
			t.Fatalf("sizeClass(%d) = %d is not a fixed point", c, sizeClass(c))
		}
	}
}

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {2359296, "2.2 MiB"}, {1 << 30, "1.0 GiB"}} {
		if got := human(c.b); got != c.want {
			t.Errorf("human(%d) = %q, want %q", c.b, got, c.want)
		}
	}
}

// TestUnavailable runs where no driver or GPU is present (or in a build
// without the shim): the status says why, Device fails with that reason as
// a RuntimeError, and the pool is empty.
func TestUnavailable(t *testing.T) {
	d := System()
	st := d.Status()
	if st.Available {
		t.Skipf("a CUDA GPU is present (%d devices)", st.DeviceCount)
	}
	if !strings.HasPrefix(st.Reason, "cuda: ") {
		t.Fatalf("reason %q", st.Reason)
	}
	for _, i := range []int{0, 1, -1} {
		if _, err := d.Device(i); errs.KindOf(err) != errs.KindRuntime || err.Error() != st.Reason {
			t.Fatalf("Device(%d): %v", i, err)
		}
	}
	if err := d.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if (d.Pool() != PoolStats{}) {
		t.Fatalf("Pool: %+v", d.Pool())
	}
}
