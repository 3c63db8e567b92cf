// Package errs defines the error kinds that cross the C ABI.
//
// Kernels return *Error values; the bindings turn the Kind into a status code
// and the Python layer turns the status code into ValueError, TypeError,
// MemoryError or RuntimeError. Keeping the kinds here means no kernel package
// needs to know about C or Python.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies an error the way Python will raise it.
type Kind int

// The kinds, numbered as the C ABI's status codes (0 is success).
const (
	KindValue   Kind = 1 // ValueError: bad value, shape, size
	KindType    Kind = 2 // TypeError: wrong kind of argument
	KindMemory  Kind = 3 // MemoryError: an allocation failed or would be too large
	KindRuntime Kind = 4 // RuntimeError: anything else, including recovered panics
	// KindInterrupted: the call stopped early because SIGINT arrived while it
	// ran (gokern/par); its outputs are incomplete. Python raises
	// KeyboardInterrupt (its own SIGINT handler does), or runs the call again
	// when the handler does not raise.
	KindInterrupted Kind = 5
)

// Error is an error with a Kind.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Value returns a KindValue error with a formatted message.
func Value(format string, args ...any) error {
	return &Error{KindValue, fmt.Sprintf(format, args...)}
}

// Type returns a KindType error with a formatted message.
func Type(format string, args ...any) error {
	return &Error{KindType, fmt.Sprintf(format, args...)}
}

// Memory returns a KindMemory error with a formatted message.
func Memory(format string, args ...any) error {
	return &Error{KindMemory, fmt.Sprintf(format, args...)}
}

// Runtime returns a KindRuntime error with a formatted message.
func Runtime(format string, args ...any) error {
	return &Error{KindRuntime, fmt.Sprintf(format, args...)}
}

// Interrupted returns a KindInterrupted error.
func Interrupted(format string, args ...any) error {
	return &Error{KindInterrupted, fmt.Sprintf(format, args...)}
}

// KindOf reports the Kind of err: the Kind of the first *Error in its chain,
// KindRuntime for any other error, and 0 for nil.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindRuntime
}
