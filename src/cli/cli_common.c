/* cli_common.c - helpers shared by the subcommands (see cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/device.h"
#include "exec/comm.h"
#include "gemm.h"
#include "io/file_io.h"
#include "exec/thread_pin.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"
#include "io/graph_json.h"
#include "io/model_load.h"
#include "io/safetensors.h"
#include "pass.h"

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pardo %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'pardo %s --help')\n", cmd);
    return CLI_BAD_INPUT;
}

void cli_print_error(const pardo_status *st) {
    if (pardo_comm_size() > 1) fprintf(stderr, "pardo (rank %d of %d): %s\n", pardo_comm_rank(), pardo_comm_size(), st->msg);
    else fprintf(stderr, "pardo: %s\n", st->msg);
}

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

bool cli_parse_int(const char *cmd, const char *flag, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || !end || end == text || *end || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects an integer from %ld to %ld, got '%s'", flag, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *cmd, const char *flag, const char *text, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || !end || end == text || *end || !(v >= lo && v <= hi)) {
        cli_usage_error(cmd, "%s expects a number from %g to %g, got '%s'", flag, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_executor(const char *cmd, const char *text, pardo_executor_kind *out) {
    if (strcmp(text, "auto") == 0) {
        *out = PARDO_EXEC_AUTO;
        return true;
    }
    if (strcmp(text, "sequential") == 0) {
        *out = PARDO_EXEC_SEQUENTIAL;
        return true;
    }
    if (strcmp(text, "dataflow") == 0) {
        *out = PARDO_EXEC_DATAFLOW;
        return true;
    }
    cli_usage_error(cmd, "--executor expects auto, sequential or dataflow, got '%s'", text);
    return false;
}

bool cli_parse_device(const char *cmd, const char *text, pardo_device_kind *device, int *index) {
    if (strcmp(text, "cpu") == 0) {
        *device = PARDO_DEVICE_CPU;
        *index = 0;
        return true;
    }
    if (strncmp(text, "cuda", 4) == 0 && (text[4] == '\0' || text[4] == ':')) {
        long k = 0;
        if (text[4] == ':' && !cli_parse_int(cmd, "--device cuda:K", text + 5, 0, 1023, &k)) return false;
        *device = PARDO_DEVICE_CUDA;
        *index = (int)k;
        return true;
    }
    cli_usage_error(cmd, "--device expects cpu, cuda or cuda:K, got '%s'", text);
    return false;
}

int cli_parse_exec_flag(const char *cmd, int argc, char **argv, int *i, long *threads, pardo_executor_kind *executor) {
    const char *arg = argv[*i], *v;
    if (cli_flag_is(arg, "--threads"))
        return (v = cli_flag_value(cmd, argc, argv, i, "--threads")) &&
                       cli_parse_int(cmd, "--threads", v, 1, PARDO_MAX_THREADS, threads)
                   ? 1
                   : -1;
    if (cli_flag_is(arg, "--executor"))
        return (v = cli_flag_value(cmd, argc, argv, i, "--executor")) && parse_executor(cmd, v, executor) ? 1 : -1;
    return 0;
}

bool cli_flag_is(const char *arg, const char *flag) {
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag) {
    const char *arg = argv[*i];
    size_t n = strlen(flag);
    if (arg[n] == '=') return arg + n + 1;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "%s needs a value", flag);
        return NULL;
    }
    return argv[++*i];
}

/* The loaded model's weights (an ONNX model's initializers); one model per process. */
static pardo_tensor_list model_weights;
static bool model_is_onnx;

const pardo_tensor_list *cli_model_weights(void) { return &model_weights; }

bool cli_model_is_onnx(void) { return model_is_onnx; }

void cli_model_release(void) { pardo_tensor_list_clear(&model_weights); }

int cli_checkpoint_with_weights(const char *load, pardo_tensor_list *ckpt) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor_list_init(ckpt);
    if (load && pardo_safetensors_read(load, ckpt, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    for (int i = 0; i < model_weights.n; i++) /* the checkpoint's entries win */
        if (!pardo_tensor_list_find(ckpt, model_weights.names[i]) &&
            pardo_tensor_list_add(ckpt, model_weights.names[i], model_weights.tensors[i], &st) != PARDO_OK) {
            cli_print_error(&st);
            pardo_tensor_list_clear(ckpt);
            return CLI_FAILED;
        }
    return CLI_OK;
}

pardo_program *cli_load_checked(const char *path) {
    pardo_status st;
    pardo_program *p = NULL;
    pardo_status_clear(&st);
    pardo_tensor_list_clear(&model_weights);
    if (pardo_model_load(path, &p, &model_weights, &model_is_onnx, &st) != PARDO_OK) {
        cli_print_error(&st);
        return NULL;
    }
    pardo_pass_options opt = {0};
    if (!model_is_onnx && pardo_pass_check(p, &opt, &st) != PARDO_OK) { /* the importer checked its program */
        cli_print_error(&st);
        pardo_program_free(p);
        return NULL;
    }
    return p;
}

int cli_trace_start(void) {
    pardo_status st;
    pardo_status_clear(&st);
    if (pardo_trace_start(&st) == PARDO_OK) return CLI_OK;
    cli_print_error(&st);
    return st.code == PARDO_EINVAL ? CLI_BAD_INPUT : CLI_FAILED;
}

int cli_trace_finish(const char *path, bool profile, const char *graph, const char *command, int threads, long steps,
                     const char *status) {
    pardo_trace_stop();
    pardo_status st;
    pardo_status_clear(&st);
    pardo_trace_info info = {.graph = graph, .command = command, .threads = threads, .steps = steps, .status = status};
    char *json = NULL;
    size_t n = 0;
    int rc = CLI_OK;
    if (pardo_trace_full_at_s() >= 0)
        fprintf(stderr, "pardo: warning: trace%s%s: recording stopped %.3f s into the run, when its event records "
                "reached %zu MiB (PARDO_TRACE_MAX_MB sets the limit); the %ld events after that are not in it\n",
                path ? " " : "", path ? path : "", pardo_trace_full_at_s(), pardo_trace_max_bytes() >> 20,
                pardo_trace_dropped());
    if (pardo_trace_json(&info, &json, &n, &st) != PARDO_OK) {
        cli_print_error(&st);
        rc = CLI_FAILED;
    } else {
        pardo_file_part part = {json, n};
        if (path && pardo_file_write_atomic(path, &part, 1, &st) != PARDO_OK) {
            cli_print_error(&st);
            rc = CLI_FAILED;
        }
        if (profile) {
            fflush(stdout);
            if (cli_trace_profile(stderr, json, n, "--profile") != CLI_OK) rc = CLI_FAILED;
        }
    }
    free(json);
    pardo_trace_reset();
    return rc;
}

int cli_fuse(pardo_program *p, const char *const *keep, int n_keep) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_pass_options opt = pardo_pass_defaults();
    opt.keep = keep;
    opt.n_keep = n_keep;
    if (pardo_pass_fuse(p, &opt, &st) == PARDO_OK) return CLI_OK;
    cli_print_error(&st);
    return CLI_BAD_INPUT;
}

int cli_place(pardo_program *p, pardo_device_kind device) {
    if (device != PARDO_DEVICE_CUDA || pardo_device_count() == 0) return CLI_OK; /* the CPU: nothing crosses */
    pardo_status st;
    pardo_status_clear(&st);
    pardo_pass_options opt = pardo_pass_defaults();
    if (pardo_pass_place(p, &opt, &st) == PARDO_OK) return CLI_OK;
    cli_print_error(&st);
    return CLI_BAD_INPUT;
}

bool cli_resolve_threads(long *threads) {
    if (*threads > 0) return true;
    const char *env = getenv("PARDO_NUM_THREADS");
    if (env && *env) {
        char *end;
        errno = 0;
        long n = strtol(env, &end, 10);
        if (errno != 0 || *end != '\0' || n < 1 || n > PARDO_MAX_THREADS) {
            fprintf(stderr, "pardo: $PARDO_NUM_THREADS is '%s', expected a thread count 1..%d\n", env,
                    PARDO_MAX_THREADS);
            return false;
        }
    }
    *threads = pardo_thread_pool_size(); /* the pool reads the same variable */
    return true;
}

/* False (after printing why) for a $PARDO_GEMM that names no product;
 * "blas" in a build without BLAS runs the own kernel, and says so. */
static bool env_gemm_ok(void) {
    const char *env = getenv("PARDO_GEMM");
    if (!env || !*env || strcmp(env, "own") == 0) return true;
    if (strcmp(env, "blas") != 0) {
        fprintf(stderr, "pardo: $PARDO_GEMM is '%s', expected own or blas\n", env);
        return false;
    }
    if (!pardo_gemm_blas_compiled())
        fprintf(stderr, "pardo: warning: PARDO_GEMM=blas, but this build has no BLAS (make BLAS=1): the own kernel "
                        "runs\n");
    return true;
}

/* False (after printing why) for a $PARDO_PIN_THREADS that names no placement. */
static bool env_pin_ok(void) {
    pardo_pin_mode mode;
    const char *env = getenv("PARDO_PIN_THREADS");
    if (pardo_pin_mode_parse(env, &mode)) return true;
    fprintf(stderr, "pardo: $PARDO_PIN_THREADS is '%s', expected auto, on or off\n", env);
    return false;
}

pardo_program *cli_start(long threads, const char *path) {
    pardo_status st;
    pardo_status_clear(&st);
    if (!env_gemm_ok() || !env_pin_ok()) return NULL;
    if (pardo_thread_pool_configure((int)threads, &st) != PARDO_OK) {
        cli_print_error(&st);
        return NULL;
    }
    return cli_load_checked(path);
}
