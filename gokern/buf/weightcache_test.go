package buf

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/envvar"
)

// envFreshBuf marks the child processes of TestWeightCacheBytes.
const envFreshBuf = "BITNET_GO_TEST_FRESH_PROCESS"

// The weight caches' size comes from EnvWeightCache: whole megabytes >= 0,
// the default when unset; anything else is an error naming the variable
// and the value (recorded at start-up with the default in effect).
func TestWeightCacheBytes(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
		bad  bool
	}{
		{"", DefaultWeightCacheMB << 20, false}, {"0", 0, false}, {"64", 64 << 20, false}, {" 64 ", 64 << 20, false},
		{"2000000", maxWeightCacheMB << 20, false},
		{"-3", 0, true}, {"-5", 0, true}, {"abc", 0, true}, {"lots", 0, true}, {"1.5", 0, true}, {"64MB", 0, true},
		{"99999999999999999999", 0, true},
	} {
		got, err := weightCacheBytes(c.v)
		if c.bad {
			want := fmt.Sprintf("%s must be a whole number of megabytes >= 0, got %q", EnvWeightCache, strings.TrimSpace(c.v))
			if err == nil || err.Error() != want {
				t.Errorf("%q: (%d, %v), want the error %q", c.v, got, err, want)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: (%d, %v), want %d", c.v, got, err, c.want)
		}
	}
	// What init recorded for this process's setting; then for bad and good
	// settings, each in a fresh process running this test alone.
	checkWeightCacheRecord(t)
	if os.Getenv(envFreshBuf) == "1" {
		return
	}
	for _, v := range []string{"abc", "-5", "12", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWeightCacheBytes$", "-test.count=1")
		cmd.Env = append(os.Environ(), envFreshBuf+"=1", EnvWeightCache+"="+v)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s=%q: %v\n%s", EnvWeightCache, v, err, out)
		}
	}
}

// checkWeightCacheRecord checks the start-up record of EnvWeightCache against
// the parse of the process's value, and the cache's size.
func checkWeightCacheRecord(t *testing.T) {
	v := os.Getenv(EnvWeightCache)
	n, err := weightCacheBytes(v)
	want := envvar.Setting{Name: EnvWeightCache, Value: v, InEffect: int64(n >> 20)}
	if err != nil {
		want.InEffect = DefaultWeightCacheMB
		want.Problem = fmt.Sprintf("%s must be a whole number of megabytes >= 0, got %q; using %d",
			EnvWeightCache, strings.TrimSpace(v), DefaultWeightCacheMB)
	}
	for _, s := range envvar.All() {
		if s.Name == EnvWeightCache {
			if s != want || WeightCacheBytes != int(want.InEffect)<<20 {
				t.Errorf("recorded %+v, want %+v (cache of %d bytes)", s, want, WeightCacheBytes)
			}
			return
		}
	}
	t.Errorf("%s not recorded", EnvWeightCache)
}
