/* device_none.c - device.h for builds without CUDA: no device, every device
 * call fails with PARDO_ENOTSUP. */
#include "core/device.h"

#include <stdio.h>
#include <stdatomic.h>

bool pardo_device_compiled(void) { return false; }
int pardo_device_count(void) { return 0; }
bool pardo_device_in_use(void) { return false; }

void pardo_device_note_cpu_fallback(const char *why) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "pardo: running on the CPU: %s\n", why);
}

static int no_cuda(pardo_status *st) {
    return pardo_errorf(st, PARDO_ENOTSUP, "pardo was built without CUDA (rebuild with CUDA=1 where nvcc exists)");
}

int pardo_device_set(int dev, pardo_status *st) { (void)dev; return no_cuda(st); }
int pardo_device_get(int *dev, pardo_status *st) { *dev = 0; return no_cuda(st); }
int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st) { (void)nbytes; *out = NULL; return no_cuda(st); }
void pardo_device_free(void *p) { (void)p; }
int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st) { (void)nbytes; *out = NULL; return no_cuda(st); }
void pardo_device_free_host(void *p) { (void)p; }
int pardo_device_copy_h2d(void *d, const void *s, size_t n, pardo_status *st) { (void)d; (void)s; (void)n; return no_cuda(st); }
int pardo_device_copy_d2h(void *d, const void *s, size_t n, pardo_status *st) { (void)d; (void)s; (void)n; return no_cuda(st); }
int pardo_device_copy_d2d(void *d, const void *s, size_t n, pardo_status *st) { (void)d; (void)s; (void)n; return no_cuda(st); }
int pardo_device_copy_h2d_async(void *d, const void *s, size_t n, pardo_stream stream, pardo_status *st) {
    (void)d; (void)s; (void)n; (void)stream;
    return no_cuda(st);
}
int pardo_device_memset_zero(void *d, size_t n, pardo_status *st) { (void)d; (void)n; return no_cuda(st); }
int pardo_device_compute_stream(int dev, pardo_stream *out, pardo_status *st) { (void)dev; *out = NULL; return no_cuda(st); }
int pardo_device_copy_stream(int dev, pardo_stream *out, pardo_status *st) { (void)dev; *out = NULL; return no_cuda(st); }
pardo_stream pardo_device_stream_current(void) { return NULL; }
int pardo_device_stream_create(pardo_stream *out, pardo_status *st) { *out = NULL; return no_cuda(st); }
int pardo_device_stream_sync(pardo_stream s, pardo_status *st) { (void)s; return no_cuda(st); }
void pardo_device_stream_destroy(pardo_stream s) { (void)s; }
int pardo_device_event_create(pardo_event *out, pardo_status *st) { *out = NULL; return no_cuda(st); }
int pardo_device_event_record(pardo_event ev, pardo_stream s, pardo_status *st) { (void)ev; (void)s; return no_cuda(st); }
int pardo_device_event_query(pardo_event ev, bool *done, pardo_status *st) { (void)ev; *done = true; return no_cuda(st); }
int pardo_device_event_sync(pardo_event ev, pardo_status *st) { (void)ev; return no_cuda(st); }
int pardo_device_stream_wait_event(pardo_stream s, pardo_event ev, pardo_status *st) { (void)s; (void)ev; return no_cuda(st); }
void pardo_device_event_destroy(pardo_event ev) { (void)ev; }
int pardo_device_sync(pardo_status *st) { return no_cuda(st); }
