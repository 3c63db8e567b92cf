// Package envvar records how the numeric environment variables the library
// reads at start-up were taken: the value given, the value in effect, and
// why a given value was refused. A refused value never stops the library
// from loading (the default is used instead); the bindings report these
// records and the Python layer warns once about each refused value.
package envvar

import (
	"fmt"
	"os"
	"sort"
	"sync"
)

// Setting is one variable as it was read.
type Setting struct {
	Name     string `json:"name"`
	Value    string `json:"value"`             // as set ("" when unset)
	InEffect int64  `json:"in_effect"`         // the value used
	Problem  string `json:"problem,omitempty"` // why Value was refused ("" when it was used or unset)
}

var (
	mu       sync.Mutex
	settings = map[string]Setting{}
)

// Record keeps s (replacing an earlier record of the same name).
func Record(s Setting) {
	mu.Lock()
	settings[s.Name] = s
	mu.Unlock()
}

// Int reads the numeric variable name, records how it was taken and
// returns the value in effect: parse's result for the value as set (parse
// handles the empty value too), or def when parse refuses it; note
// describes def in the record's problem (e.g. " (the number of CPUs)").
func Int(name string, def int64, note string, parse func(v string) (int64, error)) int64 {
	v := os.Getenv(name)
	s := Setting{Name: name, Value: v, InEffect: def}
	if n, err := parse(v); err != nil {
		s.Problem = fmt.Sprintf("%v; using %d%s", err, def, note)
	} else {
		s.InEffect = n
	}
	Record(s)
	return s.InEffect
}

// All returns every record, sorted by name.
func All() []Setting {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Setting, 0, len(settings))
	for _, s := range settings {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
