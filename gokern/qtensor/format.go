package qtensor

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// Format is one packed element type: the rules that turn ternary (later:
// low-bit integer) values into bytes and back. A tensor of n values is seen
// as rows x K (rows = the first dimension, see Tensor.Rows); formats that
// pack the flattened tensor (I2_S) ignore rows. Every method checks its
// counts first (n in [1, MaxElements], rows in [1, n] dividing n) and the
// lengths of its buffers against PackedLen, so no loop runs over a count
// that makes no tensor.
type Format interface {
	// Name is the format's Python name ("i2_s").
	Name() string
	// PackedLen is the number of bytes of n values in rows rows.
	PackedLen(n, rows int) (int, error)
	// Pack writes the packed bytes of values (each -1, 0 or +1).
	Pack(values []int8, rows int, dst []byte) error
	// Unpack writes the values held in src; invalid codes are ValueErrors.
	Unpack(src []byte, rows int, values []int8) error
	// Dequantize writes value*scale for the values held in src, one scale
	// per blockSize values of the flattened tensor (0: one scale).
	Dequantize(src []byte, rows, blockSize int, scales []float32, out []float32) error
}

// CheckLen checks a packed buffer of got bytes against f's length for n
// values in rows rows: every format's Pack, Unpack and Dequantize, and the
// ops that hand packed device buffers on, check through it.
func CheckLen(f Format, n, rows, got int) error {
	want, err := f.PackedLen(n, rows)
	if err != nil {
		return err
	}
	if got != want {
		return errs.Value("packed must have %d bytes for %d values in %s, got %d", want, n, f.Name(), got)
	}
	return nil
}

var (
	regMu    sync.RWMutex
	registry = map[DType]Format{}
)

// Register adds format f under dtype d; packages that implement formats
// call it from init. Registering a dtype twice panics (a programming error).
func Register(d DType, f Format) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[d]; dup {
		panic("qtensor: format " + f.Name() + " registered twice")
	}
	registry[d] = f
}

// Lookup returns the format registered for d, or a ValueError listing the
// registered ones.
func Lookup(d DType) (Format, error) {
	regMu.RLock()
	f, ok := registry[d]
	regMu.RUnlock()
	if ok {
		return f, nil
	}
	return nil, errs.Value("qtype must be %s, got %d", Known(), int32(d))
}

// Known describes the registered formats for messages: "0 (i2_s), 1 (tl1)
// or 2 (tl2)".
func Known() string {
	regMu.RLock()
	defer regMu.RUnlock()
	ds := make([]DType, 0, len(registry))
	for d := range registry {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strings.Join([]string{strconv.Itoa(int(d)), " (", registry[d].Name(), ")"}, "")
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// Formats returns the registered dtypes and names, for reporting.
func Formats() map[string]int32 {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make(map[string]int32, len(registry))
	for d, f := range registry {
		out[f.Name()] = int32(d)
	}
	return out
}
