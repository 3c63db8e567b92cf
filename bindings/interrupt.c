// SIGINT while a call runs: see interrupt.go.

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

uint32_t bng_sigint_count;                    // SIGINTs seen; read by Go (gokern/par)
static struct sigaction bng_prev;             // the handler chained to (Python's)
static volatile sig_atomic_t bng_in_handler;  // breaks a cycle of handlers that chain to each other
static pthread_mutex_t bng_sig_mu = PTHREAD_MUTEX_INITIALIZER;

// The previous handler runs first and the count is taken after it: once Go
// sees the count change and the call returns, Python has already marked the
// signal pending, so it raises KeyboardInterrupt as the call returns instead
// of running it again.
static void bng_on_sigint(int sig, siginfo_t *info, void *ctx) {
	if (!bng_in_handler) {
		bng_in_handler = 1;
		if (bng_prev.sa_flags & SA_SIGINFO) {
			if (bng_prev.sa_sigaction != NULL) {
				bng_prev.sa_sigaction(sig, info, ctx);
			}
		} else if (bng_prev.sa_handler != SIG_DFL && bng_prev.sa_handler != SIG_IGN && bng_prev.sa_handler != NULL) {
			bng_prev.sa_handler(sig);
		}
		bng_in_handler = 0;
	}
	__atomic_add_fetch(&bng_sigint_count, 1, __ATOMIC_SEQ_CST);
}

static int bng_is_ours(const struct sigaction *sa) {
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == bng_on_sigint;
}

// bng_arm_sigint puts bng_on_sigint in front of the process's SIGINT handler
// when that handler is a function (Python installs one at start-up, and again
// whenever signal.signal(SIGINT, ...) is called): ours counts the signal and
// calls it with the same arguments. The default action (SIG_DFL: the process
// ends) and SIG_IGN are left alone. Flags and mask are the previous handler's,
// plus SA_SIGINFO and SA_ONSTACK (the Go runtime needs handlers that run on
// the signal stack): SA_RESTART is not added, so blocking system calls are
// still interrupted as Python expects. Returns 1 when ours is in place.
int bng_arm_sigint(void) {
	struct sigaction cur, mine;
	if (sigaction(SIGINT, NULL, &cur) != 0) {
		return 0;
	}
	if (bng_is_ours(&cur)) {
		return 1;
	}
	if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) {
		return 0;
	}
	pthread_mutex_lock(&bng_sig_mu);
	int ok = 0;
	if (sigaction(SIGINT, NULL, &cur) == 0) {
		if (bng_is_ours(&cur)) {
			ok = 1;
		} else if ((cur.sa_flags & SA_SIGINFO) || (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN)) {
			memset(&mine, 0, sizeof mine);
			mine.sa_sigaction = bng_on_sigint;
			mine.sa_mask = cur.sa_mask;
			mine.sa_flags = (cur.sa_flags & ~SA_RESETHAND) | SA_SIGINFO | SA_ONSTACK;
			bng_prev = cur;
			ok = sigaction(SIGINT, &mine, NULL) == 0;
		}
	}
	pthread_mutex_unlock(&bng_sig_mu);
	return ok;
}
