package main

/*
#include <stdint.h>
extern uint32_t bng_sigint_count;
int bng_arm_sigint(void);
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Interrupting long calls with Ctrl-C. While a call runs, the Python thread
// that made it is inside C and cannot run Python's SIGINT handler, so
// KeyboardInterrupt would wait for the call to end. interrupt.c chains a
// small C handler in front of the process's SIGINT handler: it counts the
// signal (bng_sigint_count) and calls the previous handler, so Python still
// sees the signal as usual. gokern/par compares the count with its value
// when the calls in flight began (par.Begin, in guard): the kernels stop
// between pieces of work and the export returns status 5
// (errs.KindInterrupted). The handler is re-armed at the start of every call
// (one sigaction call), since Python puts its own back whenever
// signal.signal(SIGINT, ...) runs (IPython and Jupyter do so around each
// cell).

func init() {
	par.SetInterruptCounter((*uint32)(unsafe.Pointer(&C.bng_sigint_count)))
}

// armInterrupt puts the counting handler in place (see interrupt.c).
func armInterrupt() { C.bng_arm_sigint() }
