package buf

import (
	"strconv"
	"strings"

	"github.com/bitnet-go/bitnet_go/gokern/envvar"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// EnvWeightCache names the variable that sets the most megabytes each
// cache of weight layouts (conv2d's layouts, qlinear's panels) may keep
// (default DefaultWeightCacheMB; 0 keeps none).
const (
	EnvWeightCache       = "BITNET_GO_WEIGHT_CACHE_MB"
	DefaultWeightCacheMB = 256
)

// WeightCacheBytes is EnvWeightCache's setting in bytes, read once at
// start-up: the MaxBytes of every weight-layout Cache. A bad value must not
// stop the library from loading: envvar falls back to the default and
// records why (the Python layer warns once).
var WeightCacheBytes = int(envvar.Int(EnvWeightCache, DefaultWeightCacheMB, "", func(v string) (int64, error) {
	n, err := weightCacheBytes(v)
	return int64(n >> 20), err
})) << 20

// maxWeightCacheMB bounds EnvWeightCache (larger values are taken as it).
const maxWeightCacheMB = 1 << 20

// weightCacheBytes parses EnvWeightCache's value, a whole number of
// megabytes >= 0 (empty: the default), into bytes.
func weightCacheBytes(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultWeightCacheMB << 20, nil
	}
	mb, err := strconv.Atoi(v)
	if err != nil || mb < 0 {
		return 0, errs.Value("%s must be a whole number of megabytes >= 0, got %q", EnvWeightCache, v)
	}
	return min(mb, maxWeightCacheMB) << 20, nil
}
