package main

/*
#include <stdint.h>
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// Diagnostics: measurements and introspection for benchmarks and tests, kept
// out of the production ABI behind one export. Each entry is a named
// function from a JSON request to a JSON-encodable result; adding one is a
// registerDiag call in an init function, with no new export.

var diagEntries = struct {
	sync.Mutex
	m map[string]func(json.RawMessage) (any, error)
}{m: map[string]func(json.RawMessage) (any, error){}}

// registerDiag adds a named diagnostics entry; call it from init(). fn
// receives the request without its "name" member and returns the result,
// which bng_diagnostics encodes as JSON. A name registered twice, or "list",
// panics.
func registerDiag(name string, fn func(req json.RawMessage) (any, error)) {
	diagEntries.Lock()
	defer diagEntries.Unlock()
	if _, dup := diagEntries.m[name]; dup || name == "list" || name == "" {
		panic("registerDiag: name " + name + " is empty, reserved or registered twice")
	}
	diagEntries.m[name] = fn
}

// diagnose runs the request: {"name": "<entry>", ...the entry's arguments}.
// A request that is not a JSON object with a string name, or names no
// entry, is a ValueError.
func diagnose(req []byte) (any, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(req, &members); err != nil || members == nil {
		return nil, errs.Value("bng_diagnostics: the request must be a JSON object {\"name\": ..., ...}: %s", jsonErr(err))
	}
	var name string
	if err := json.Unmarshal(members["name"], &name); err != nil || name == "" {
		return nil, errs.Value("bng_diagnostics: the request needs a \"name\" string (the entry to run; \"list\" lists them)")
	}
	delete(members, "name")
	diagEntries.Lock()
	fn := diagEntries.m[name]
	names := make([]string, 0, len(diagEntries.m))
	for k := range diagEntries.m {
		names = append(names, k)
	}
	diagEntries.Unlock()
	slices.Sort(names)
	if name == "list" {
		return names, nil
	}
	if fn == nil {
		return nil, errs.Value("bng_diagnostics: no entry %q (entries: %s)", name, strings.Join(names, ", "))
	}
	args, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	return fn(args)
}

// decodeArgs decodes an entry's arguments into v (a pointer to a struct
// with json tags): an unknown member or a value of the wrong type or range
// is a ValueError naming the entry.
func decodeArgs(entry string, req json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(req))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return errs.Value("bng_diagnostics: %s: %s", entry, jsonErr(err))
	}
	return nil
}

func jsonErr(err error) string {
	if err == nil {
		return "null"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// bng_diagnostics runs the diagnostics entry that request names and writes
// its result as JSON into buf.
//
//	bng_diagnostics(const char *request, int64 request_len, char *buf, int64 bufcap,
//	                char *errbuf, int64 errcap) -> status
//
// request: a JSON object {"name": "<entry>", ...the entry's arguments}
// (request_len bytes, no NUL needed). {"name": "list"} returns the sorted
// names of the registered entries. Status as every export: a malformed
// request, an unknown name or bad arguments are ValueError (1); an entry's
// own failure keeps its kind (no GPU: RuntimeError, 4).
//
//export bng_diagnostics
func bng_diagnostics(request *C.char, requestLen C.int64_t, buf *C.char, bufcap C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		req, err := view[byte](unsafe.Pointer(request), requestLen, "request")
		if err != nil {
			return err
		}
		out, err := diagnose(req)
		if err != nil {
			return err
		}
		return jsonOut(buf, bufcap, out)
	})
}
