/* comm_none.c - the communicator of a build without MPI (comm.h): one rank,
 * collectives that leave their buffers as they are. */
#include <stdlib.h>

#include "exec/comm.h"

_Atomic(pardo_comm_poll_fn) pardo_comm_poll_hook = NULL;

bool pardo_comm_built(void) { return false; }
bool pardo_comm_launched(void) { return false; }
int pardo_comm_init(pardo_status *st) {
    (void)st;
    return PARDO_OK;
}
int pardo_comm_rank(void) { return 0; }
int pardo_comm_size(void) { return 1; }
int pardo_comm_local_size(void) { return 1; }

_Atomic(pardo_comm_poll_fn) pardo_comm_poll_hook = NULL;

int pardo_comm_allreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_status *st) {
    (void)dtype, (void)buf, (void)n, (void)st;
    return PARDO_OK;
}

int pardo_comm_iallreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_comm_request *req, pardo_status *st) {
    (void)dtype, (void)buf, (void)n, (void)st;
    *req = 0;
    return PARDO_OK;
}

void pardo_comm_progress(pardo_comm_request *reqs, bool *done, int n) {
    for (int k = 0; k < n; k++) done[k] = reqs[k] == 0 || done[k];
}

int pardo_comm_wait(pardo_comm_request *req, pardo_status *st) {
    (void)st;
    *req = 0;
    return PARDO_OK;
}

_Noreturn void pardo_comm_abort(int status) { exit(status); }
void pardo_comm_finalize(void) {}
