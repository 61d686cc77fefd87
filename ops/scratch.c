/* scratch.c - per-thread kernel scratch buffers (see scratch.h). */
#include "scratch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

static pthread_key_t keys[PARDO_SCRATCH_SLOTS];
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;
static bool keys_ok;
static _Thread_local void *bufs[PARDO_SCRATCH_SLOTS];   // 64-byte aligned
static _Thread_local size_t caps[PARDO_SCRATCH_SLOTS];  // bytes

static void buf_free(void *p) { free(p); }

static void keys_make(void) {
    keys_ok = true;
    for (int i = 0; i < PARDO_SCRATCH_SLOTS; i++) keys_ok &= pthread_key_create(&keys[i], buf_free) == 0;
}

void *pardo_scratch_get(int slot, size_t bytes) {
    if (bytes <= caps[slot] && bufs[slot]) return bufs[slot];
    pthread_once(&keys_once, keys_make);
    /* by half again at least, so that a size creeping up does not reallocate each time */
    const size_t more = caps[slot] + caps[slot] / 2, want = bytes > more ? bytes : more;
    const size_t cap = want ? (want + 63) & ~(size_t)63 : 64;
    void *p = aligned_alloc(64, cap);
    if (!p) return NULL;
    free(bufs[slot]);
    bufs[slot] = p;
    caps[slot] = cap;
    if (keys_ok) pthread_setspecific(keys[slot], p); /* freed when the thread ends */
    return p;
}
