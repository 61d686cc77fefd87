/* comm_mpi.c - the communicator over MPI (comm.h; make MPI=1). Every MPI
 * call is made under one mutex (MPI_THREAD_SERIALIZED), and a collective's
 * time goes into the trace as an "allreduce" span (category "comm"). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec/comm.h"
#include "trace/trace.h"

_Atomic(pardo_comm_poll_fn) pardo_comm_poll_hook = NULL;

static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;
static int comm_rank = 0, comm_size = 1;
static bool comm_joined = false;

static MPI_Datatype mpi_type(pardo_dtype dtype);

bool pardo_comm_built(void) { return true; }

bool pardo_comm_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

int pardo_comm_init(pardo_status *st) {
    pthread_mutex_lock(&comm_lock);
    int rc = PARDO_OK;
    if (!comm_joined && pardo_comm_launched()) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            rc = pardo_errorf(st, PARDO_ERUNTIME, "MPI_Init_thread failed: this process cannot join the MPI job");
        } else if (provided < MPI_THREAD_SERIALIZED) {
            rc = pardo_errorf(st, PARDO_ERUNTIME, "this MPI gives thread level %d, pardo needs MPI_THREAD_SERIALIZED",
                              provided);
        } else {
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            MPI_Comm_rank(MPI_COMM_WORLD, &comm_rank);
            MPI_Comm_size(MPI_COMM_WORLD, &comm_size);
            comm_joined = true;
        }
    }
    pthread_mutex_unlock(&comm_lock);
    return rc;
}

int pardo_comm_rank(void) { return comm_rank; }
int pardo_comm_size(void) { return comm_size; }

int pardo_comm_local_size(void) {
    const char *s = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = s ? atoi(s) : 1;
    return n >= 1 ? n : 1;
}

int pardo_comm_allreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_status *st) {
    if (!comm_joined || comm_size == 1 || n == 0) return PARDO_OK;
    MPI_Datatype t = mpi_type(dtype);
    if (t == MPI_DATATYPE_NULL)
        return pardo_errorf(st, PARDO_EINVAL, "allreduce of %s: expected float32, float64 or int64",
                            pardo_dtype_name(dtype));
    int64_t t0 = pardo_trace_on() ? pardo_trace_now_ns() : 0;
    int rc = MPI_SUCCESS;
    pthread_mutex_lock(&comm_lock);
    for (int64_t at = 0; rc == MPI_SUCCESS && at < n;) { /* MPI counts are ints */
        int count = n - at > (1 << 30) ? 1 << 30 : (int)(n - at);
        rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * (int64_t)pardo_dtype_size(dtype), count, t, MPI_SUM,
                           MPI_COMM_WORLD);
        at += count;
    }
    pthread_mutex_unlock(&comm_lock);
    if (t0) {
        pardo_trace_arg args[2] = {{"elements", NULL, (double)n}, {"dtype", pardo_dtype_name(dtype), 0}};
        pardo_trace_complete("allreduce", "comm", t0, pardo_trace_now_ns(), args, 2);
    }
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        return pardo_errorf(st, PARDO_ERUNTIME, "MPI_Allreduce of %lld elements on rank %d of %d: %s", (long long)n,
                            comm_rank, comm_size, msg);
    }
    return PARDO_OK;
}

/* The MPI request behind a pardo_comm_request: a slot of this table (requests outstanding at once are few:
 * one per bucket of a step). */
#define MAX_REQUESTS 1024
static MPI_Request requests[MAX_REQUESTS];
static bool request_used[MAX_REQUESTS];

static MPI_Datatype mpi_type(pardo_dtype dtype) {
    return dtype == PARDO_F32 ? MPI_FLOAT : dtype == PARDO_F64 ? MPI_DOUBLE : dtype == PARDO_I64 ? MPI_INT64_T
                                                                                                  : MPI_DATATYPE_NULL;
}

int pardo_comm_iallreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_comm_request *req, pardo_status *st) {
    *req = 0;
    if (!comm_joined || comm_size == 1 || n == 0) return PARDO_OK;
    if (mpi_type(dtype) == MPI_DATATYPE_NULL || n > (1 << 30))
        return pardo_errorf(st, PARDO_EINVAL, "a non-blocking allreduce of %lld %s", (long long)n,
                            pardo_dtype_name(dtype));
    pthread_mutex_lock(&comm_lock);
    int slot = 0;
    while (slot < MAX_REQUESTS && request_used[slot]) slot++;
    int rc = slot < MAX_REQUESTS ? MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD,
                                                  &requests[slot])
                                 : MPI_ERR_OTHER;
    if (rc == MPI_SUCCESS) request_used[slot] = true;
    pthread_mutex_unlock(&comm_lock);
    if (rc != MPI_SUCCESS)
        return pardo_errorf(st, PARDO_ERUNTIME, "MPI_Iallreduce of %lld elements on rank %d of %d failed%s",
                            (long long)n, comm_rank, comm_size, slot < MAX_REQUESTS ? "" : " (too many started)");
    *req = slot + 1;
    return PARDO_OK;
}

void pardo_comm_progress(pardo_comm_request *reqs, bool *done, int n) {
    if (pthread_mutex_trylock(&comm_lock) != 0) return; /* another thread is in MPI: it progresses them too */
    for (int k = 0; k < n; k++) {
        if (done[k] || reqs[k] == 0) {
            done[k] = true;
            continue;
        }
        int flag = 0;
        MPI_Test(&requests[reqs[k] - 1], &flag, MPI_STATUS_IGNORE);
        if (flag) {
            request_used[reqs[k] - 1] = false;
            reqs[k] = 0;
            done[k] = true;
        }
    }
    pthread_mutex_unlock(&comm_lock);
}

int pardo_comm_wait(pardo_comm_request *req, pardo_status *st) {
    if (*req == 0) return PARDO_OK;
    int rc = MPI_SUCCESS;
    /* waiting under the lock would keep the other threads out of MPI: test until done instead */
    for (int flag = 0; !flag && rc == MPI_SUCCESS;) {
        pthread_mutex_lock(&comm_lock);
        rc = MPI_Test(&requests[*req - 1], &flag, MPI_STATUS_IGNORE);
        if (flag || rc != MPI_SUCCESS) request_used[*req - 1] = false;
        pthread_mutex_unlock(&comm_lock);
    }
    *req = 0;
    return rc == MPI_SUCCESS ? PARDO_OK
                             : pardo_errorf(st, PARDO_ERUNTIME, "a non-blocking allreduce on rank %d of %d failed",
                                            comm_rank, comm_size);
}

_Noreturn void pardo_comm_abort(int status) {
    fflush(stdout);
    fflush(stderr);
    if (comm_joined && comm_size > 1) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void pardo_comm_finalize(void) {
    if (!comm_joined) return;
    pthread_mutex_lock(&comm_lock);
    MPI_Finalize();
    comm_joined = false;
    pthread_mutex_unlock(&comm_lock);
}
