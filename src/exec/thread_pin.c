/* thread_pin.c - the pool's thread placement (see thread_pin.h). */
#include "exec/thread_pin.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The mask of the thread that started the pool, before it was pinned. */
static struct {
    bool saved;
    pthread_t thread;
    cpu_set_t mask;
} caller;

bool pardo_pin_mode_parse(const char *text, pardo_pin_mode *mode) {
    if (!text || !*text || strcmp(text, "auto") == 0) *mode = PARDO_PIN_AUTO;
    else if (strcmp(text, "on") == 0) *mode = PARDO_PIN_ON;
    else if (strcmp(text, "off") == 0) *mode = PARDO_PIN_OFF;
    else return false;
    return true;
}

/* True when mpirun (Open MPI, MPICH's hydra) says other ranks share this host. */
static bool ranks_share_host(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) return true;
    }
    return false;
}

bool pardo_pin_plan(int n, int *cpus) {
    pardo_pin_mode mode;
    if (!pardo_pin_mode_parse(getenv("PARDO_PIN_THREADS"), &mode)) mode = PARDO_PIN_AUTO;
    if (mode == PARDO_PIN_OFF || n < 2) return false;
    cpu_set_t mask;
    if (caller.saved && pthread_equal(caller.thread, pthread_self())) mask = caller.mask;
    else if (sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
    int allowed[CPU_SETSIZE], count = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mask)) allowed[count++] = c;
    if (count < 2) return false;
    /* auto: only a pool that has every CPU of the mask; one with fewer would take the first CPUs, where a second
     * process doing the same would pile onto them while the rest idle */
    if (mode == PARDO_PIN_AUTO && (n != count || ranks_share_host())) return false;
    for (int k = 0; k < n; k++) cpus[k] = allowed[k % count];
    return true;
}

bool pardo_pin_self(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

void pardo_pin_save_caller(void) {
    if (caller.saved && pthread_equal(caller.thread, pthread_self())) return; /* keep the mask from before pinning */
    if (pthread_getaffinity_np(pthread_self(), sizeof caller.mask, &caller.mask) != 0) return;
    caller.thread = pthread_self();
    caller.saved = true;
}

void pardo_pin_restore_caller(void) {
    if (!caller.saved || !pthread_equal(caller.thread, pthread_self())) return;
    pthread_setaffinity_np(pthread_self(), sizeof caller.mask, &caller.mask);
    caller.saved = false;
}
