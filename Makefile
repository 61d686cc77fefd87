# pardo - one non-recursive Makefile.
#   make            build/pardo and build/libpardo.a
#   make test       every Check suite and the CLI end-to-end tests (and, in a CUDA build, make gpu-mock-test)
#   make gpu-mock-test  the CUDA, SyncedMemory and device-stream suites and pardo train --device cuda against a
#                   host stand-in for the GPU (CUDA=1)
#   make asan       the same tests built with address + undefined sanitizers (build-asan/)
#   make tsan       the same tests built with the thread sanitizer (build-tsan/)
#   make valgrind   the normal build's pardo under valgrind's memcheck (tools/valgrind.sh: a transpiled graph run
#                   on 2 threads, a short `pardo train`, bad input), failing on any error or definite/possible leak
#   make demo       build, run the example graphs, train an MLP on the handwritten digits (>= 95% held out)
#   make bench      build the bench drivers and run tools/bench/run: pardo against PyTorch, ONNX Runtime and
#                   OpenBLAS (BENCH_ARGS=--quick for a short check; see tools/bench/run --help)
#   make install    build/pardo to $(PREFIX)/bin, build/libpardo.a to $(PREFIX)/lib, the public headers under
#                   $(PREFIX)/include/pardo/ (<pardo/engine.h>, <pardo/exec/executor.h>, ...) and the link line
#                   as $(PREFIX)/lib/pkgconfig/pardo.pc (PREFIX=/usr/local; DESTDIR is put in front of every path)
#   make uninstall  removes exactly what make install put there
#   make fuzz       build build-asan/pardo and feed it broken graphs, feeds, checkpoints, traces and command
#                   lines (tools/fuzz/fuzz.py, Debian's python3-numpy; FUZZ_ARGS="--iterations N --seed S")
#   make onnx-test  run the ONNX backend node tests (Debian's libonnx-testdata) through pardo's importer, with the
#                   pass / fail / unsupported count per op type; fails on any fail or a pass count below
#                   tests/onnx_pass_floor (skipped, saying so, where the test data or ONNX support is missing)
# Switches: CUDA=0|1 (default: 1 where nvcc is found), BLAS=0|1 (default: 1 where pkg-config finds openblas),
#           ONNX=0|1 (default: 1 where protoc-c, libprotobuf-c and onnx.proto are found),
#           MPI=0|1 (default: 1 where Open MPI's mpicc is found: mpirun -np N pardo train),
#           SANITIZE=address,undefined|thread,
#           WERROR=1 (warnings are errors; CI sets it).

CC       ?= gcc
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc))
CUDA     ?= $(if $(NVCC),1,0)
# BLAS=1 links OpenBLAS (found by pkg-config) for the matrix product: per shape class the faster of it and the
# own kernel (ops/gemm_pick.c, measured once and cached; PARDO_GEMM=own|blas forces one). BLIS is not looked for:
# pardo calls OpenBLAS's own entry points (openblas_set_num_threads) and opens one library.
BLAS_FOUND := $(shell pkg-config --exists openblas 2>/dev/null && echo 1)
BLAS     ?= $(if $(BLAS_FOUND),1,0)
SANITIZE ?=
# ONNX=1 reads .onnx models: onnx.proto (Debian's libonnx-dev) compiled by protoc-c, linked with libprotobuf-c.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
PROTOC_C   ?= $(shell command -v protoc-c 2>/dev/null)
ONNX_FOUND := $(shell test -n "$(PROTOC_C)" && test -f "$(ONNX_PROTO)" && pkg-config --exists libprotobuf-c 2>/dev/null && echo 1)
ONNX       ?= $(if $(ONNX_FOUND),1,0)

# MPI=1 builds `mpirun -np N pardo train` (src/exec/comm_mpi.c) with Open MPI's compiler wrapper flags.
MPICC      ?= $(shell command -v mpicc 2>/dev/null)
MPI_FOUND  := $(shell test -n "$(MPICC)" && $(MPICC) --showme:compile >/dev/null 2>&1 && echo 1)
MPI        ?= $(if $(MPI_FOUND),1,0)

# A CPU-only build on a machine with nvcc gets its own folder, so the two never mix objects.
NOCUDA_SUFFIX = $(if $(and $(NVCC),$(filter 0,$(CUDA))),-nocuda)
# Likewise a BLAS=0 build where OpenBLAS is found.
NOBLAS_SUFFIX = $(if $(and $(BLAS_FOUND),$(filter 0,$(BLAS))),-noblas)
# Likewise an ONNX=0 build where protobuf-c is found.
NOONNX_SUFFIX = $(if $(and $(ONNX_FOUND),$(filter 0,$(ONNX))),-noonnx)
# Likewise an MPI=0 build where mpicc is found.
NOMPI_SUFFIX = $(if $(and $(MPI_FOUND),$(filter 0,$(MPI))),-nompi)
SUFFIX = $(NOCUDA_SUFFIX)$(NOBLAS_SUFFIX)$(NOONNX_SUFFIX)$(NOMPI_SUFFIX)
ifeq ($(SANITIZE),)
  BUILD ?= build$(SUFFIX)
else ifeq ($(SANITIZE),address,undefined)
  BUILD ?= build-asan$(SUFFIX)
  SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),thread)
  BUILD ?= build-tsan$(SUFFIX)
  SAN_FLAGS = -fsanitize=thread
else
  $(error SANITIZE must be empty, address,undefined or thread (got '$(SANITIZE)'))
endif
ifneq ($(CUDA),0)
  ifneq ($(CUDA),1)
    $(error CUDA must be 0 or 1 (got '$(CUDA)'))
  endif
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found (set NVCC or CUDA_HOME))
  endif
endif
ifeq ($(BLAS),1)
  ifeq ($(BLAS_FOUND),)
    $(error BLAS=1 but pkg-config finds no openblas (apt-get install libopenblas-dev))
  endif
  # OpenBLAS is opened on first use (ops/gemm_blas.c), from the libdir pkg-config names (Debian keeps serial,
  # pthread and openmp builds side by side): a run that never calls it does not pay for loading it.
  BLAS_CFLAGS = -DPARDO_BLAS $(shell pkg-config --cflags openblas) \
                -DPARDO_BLAS_LIBRARY='"$(patsubst %/,%,$(shell pkg-config --variable=libdir openblas))/libopenblas.so.0"'
  BLAS_LIBS   = -ldl
else ifneq ($(BLAS),0)
  $(error BLAS must be 0 or 1 (got '$(BLAS)'))
endif
ifeq ($(ONNX),1)
  ifeq ($(ONNX_FOUND),)
    $(error ONNX=1 but protoc-c, libprotobuf-c or $(ONNX_PROTO) was not found (tools/install-deps.sh installs them))
  endif
  ONNX_LIBS = $(shell pkg-config --libs libprotobuf-c)
else ifneq ($(ONNX),0)
  $(error ONNX must be 0 or 1 (got '$(ONNX)'))
endif

ifeq ($(MPI),1)
  ifeq ($(MPI_FOUND),)
    $(error MPI=1 but mpicc was not found (tools/install-deps.sh installs Open MPI))
  endif
  MPI_CFLAGS = $(shell $(MPICC) --showme:compile)
  LDLIBS    += $(shell $(MPICC) --showme:link)
else ifneq ($(MPI),0)
  $(error MPI must be 0 or 1 (got '$(MPI)'))
endif

WARN = -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wdouble-promotion
ifeq ($(WERROR),1)
  WARN += -Werror
endif
OPT ?= -O2
# Dependencies come from pkg-config, evaluated when a recipe runs (after `deps`).
DEP_CFLAGS = $(shell pkg-config --cflags libcjson 2>/dev/null)
DEP_LIBS   = $(shell pkg-config --libs libcjson 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -Isrc -Iops -Iops/cuda -Itranspiler -MMD -MP -pthread $(SAN_FLAGS)
LDFLAGS += -pthread $(SAN_FLAGS)
LDLIBS  += -lm

# src/ is in rooms by concern (core, exec, io, trace, train, cli: see ARCHITECTURE.md), one folder deep.
ONNX_SRC := $(filter-out src/io/onnx_none.c,$(wildcard src/io/onnx*.c))
LIB_SRC := $(sort $(filter-out src/cli/main.c src/core/device_cuda.c src/core/device_none.c src/exec/comm_mpi.c src/exec/comm_none.c $(wildcard src/io/onnx*.c),$(wildcard src/*/*.c)) \
             $(wildcard ops/*.c) $(wildcard transpiler/*.c))
CU_SRC  :=
ifeq ($(CUDA),1)
  LIB_SRC += src/core/device_cuda.c $(wildcard ops/cuda/*.c)
  CU_SRC  := $(wildcard ops/cuda/*.cu)
  CUDA_CFLAGS = -I$(CUDA_HOME)/include
  # ops/cuda/kernels.h declares the kernels as plain functions under PARDO_CUDA (weak, so NULL, without it): the op
  # defs' references then pull ops/cuda/*.o out of libpardo.a into every program that links it
  CFLAGS  += -DPARDO_CUDA
  $(BUILD)/ops/cuda/matmul.cu.o: NVCCFLAGS += -DPARDO_CUDA_LIBDIR='"$(CUDA_HOME)/lib64"'
  # cuBLAS (matmul's products) is opened with dlopen on the first GPU product, not linked: loading it opens the CUDA
  # driver, which a CPU run of a CUDA build never does (tests/cli_test.sh checks)
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl
  NVCCFLAGS ?= -O2 -std=c++17 -gencode arch=compute_75,code=[compute_75,sm_75] -gencode arch=compute_90,code=sm_90 -Isrc -Iops -MMD -MP --compiler-options -fPIC,-Wall
else
  LIB_SRC += src/core/device_none.c
endif
ifeq ($(MPI),1)
  LIB_SRC += src/exec/comm_mpi.c
  $(BUILD)/src/exec/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)
else
  LIB_SRC += src/exec/comm_none.c
endif
ifeq ($(ONNX),1)
  # onnx.pb-c.[ch] generated into the build folder from Debian's onnx.proto
  ONNX_GEN := $(BUILD)/gen/onnx.pb-c.c
  LIB_SRC  += $(ONNX_SRC)
else
  LIB_SRC  += src/io/onnx_none.c
endif
TEST_SRC := $(wildcard tests/check_*.c) $(filter-out tests/check_%,$(wildcard tests/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o) $(ONNX_GEN:%.c=%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libpardo.a
BIN      := $(BUILD)/pardo
TEST_BIN := $(BUILD)/check_pardo
BENCH_BINS := $(BUILD)/tools/bench/bench_threads $(BUILD)/tools/bench/bench_pardo $(BUILD)/tools/bench/bench_gemm \
              $(BUILD)/tools/bench/bench_engine

.PHONY: all test unit cli asan tsan valgrind demo bench fuzz clean deps install uninstall onnx-test gpu-mock-test
all: $(BIN) $(LIB)

deps:
	@pkg-config --exists libcjson check || tools/install-deps.sh

$(BUILD)/src/core/device_cuda.o: CFLAGS += $(CUDA_CFLAGS)
# The importer includes the generated header; protoc-c's code is compiled without pardo's warning set.
$(ONNX_SRC:%.c=$(BUILD)/%.o): CFLAGS += -I$(BUILD)/gen $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
$(ONNX_SRC:%.c=$(BUILD)/%.o): $(BUILD)/gen/onnx.pb-c.h
$(BUILD)/gen/onnx.pb-c.c $(BUILD)/gen/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p $(dir $@)
	@echo "  PROTOC-C $<"
	$(Q)$(PROTOC_C) --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(BUILD)/gen $(ONNX_PROTO)
$(BUILD)/gen/onnx.pb-c.o: $(BUILD)/gen/onnx.pb-c.c
	@echo "  CC    $<"
	$(Q)$(CC) -std=c11 $(OPT) -g -w $(SAN_FLAGS) -I$(BUILD)/gen $(shell pkg-config --cflags libprotobuf-c 2>/dev/null) -c $< -o $@
$(BUILD)/ops/gemm_blas.o: CFLAGS += $(BLAS_CFLAGS)
# The kernels' loops are vectorised at the default -O2 too (GCC's -O2 cost model leaves loops with run-time trip
# counts scalar); vectorising elementwise loops does not change a float result. OPT=-O0/-O1 builds are left alone.
OPS_VEC ?= $(if $(filter -O2,$(OPT)),-ftree-vectorize -fvect-cost-model=dynamic)
# pardo never unmasks floating-point exceptions, so a float compare may be evaluated where the source only selects
# by it: without this, GCC leaves the selects of ops/vmath.h (and softmax's lane max) as branches, and no loop over
# them vectorises for AVX2 or the baseline (AVX-512's masks did). It changes no value.
OPS_FP ?= -fno-trapping-math
$(BUILD)/ops/%.o: CFLAGS += $(OPS_VEC) $(OPS_FP)
$(BUILD)/ops/cuda/%.o: CFLAGS += $(CUDA_CFLAGS)

Q ?= @
$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	$(Q)$(CC) $(CFLAGS) $(DEP_CFLAGS) $(CHECK_CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu | deps
	@mkdir -p $(dir $@)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	@echo "  AR    $@"
	$(Q)ar rcs $@ $^

$(BIN): $(BUILD)/src/cli/main.o $(LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++)

$(TEST_BIN): $(TEST_OBJ) $(LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(CHECK_LIBS) $(BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++)

# The bench's C drivers; bench_gemm times OpenBLAS directly wherever pkg-config finds it (even with BLAS=0).
ifneq ($(BLAS_FOUND),)
  BENCH_BLAS_CFLAGS = -DBENCH_OPENBLAS $(shell pkg-config --cflags openblas)
  BENCH_BLAS_LIBS   = $(shell pkg-config --libs openblas) -Wl,-rpath,$(shell pkg-config --variable=libdir openblas)
endif
$(BUILD)/tools/bench/bench_gemm.o: CFLAGS += $(BENCH_BLAS_CFLAGS)
# W4's peer, libgomp's fork/join (bench_omp), where $(CC) -fopenmp links; tools/bench/run says so and skips it otherwise.
ifeq ($(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1),1)
  BENCH_BINS += $(BUILD)/tools/bench/bench_omp
  $(BUILD)/tools/bench/bench_omp.o: CFLAGS += -fopenmp
  $(BUILD)/tools/bench/bench_omp: LDFLAGS += -fopenmp
endif
$(BENCH_BINS): %: %.o $(LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(BENCH_BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++)

# make gpu-mock-test (part of make test in CUDA builds): the GPU half of pardo (the executor's device path,
# SyncedMemory's heads, the ops/cuda/ glue, pardo train --device cuda) run on a machine without a GPU, against a
# host stand-in for the device (tests/gpu_mock/: device.h over host memory, launch.h's kernels and cuBLAS calls as
# reference loops) linked in place of src/core/device_cuda.c and the .cu objects, into $(BUILD)/gpu-mock/ only.
# The .cu kernels and cuBLAS themselves are what tools/gpu_check.sh checks on a GPU.
MOCK_DIR := $(BUILD)/gpu-mock
MOCK_OBJ := $(BUILD)/tests/gpu_mock/host_device.o $(BUILD)/tests/gpu_mock/host_launch.o
MOCK_OBJ += $(BUILD)/tests/gpu_mock/host_launch_nn.o
MOCK_OBJ += $(BUILD)/tests/gpu_mock/host_launch_train.o
MOCK_LIB := $(MOCK_DIR)/libpardo-host-gpu.a
ifeq ($(CUDA),1)
$(MOCK_LIB): $(filter-out $(BUILD)/src/core/device_cuda.o $(CU_SRC:%.cu=$(BUILD)/%.cu.o),$(LIB_OBJ)) $(MOCK_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	@echo "  AR    $@"
	$(Q)ar rcs $@ $^
$(MOCK_DIR)/check_pardo: $(TEST_OBJ) $(MOCK_LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(CHECK_LIBS) $(BLAS_LIBS) $(LDLIBS)
$(MOCK_DIR)/pardo: $(BUILD)/src/cli/main.o $(MOCK_LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(LDLIBS)
gpu-mock-test: $(MOCK_DIR)/check_pardo $(MOCK_DIR)/pardo $(BUILD)/tests/tools/npy_close
	$(TEST_ENV) CK_RUN_SUITE=cuda ./$(MOCK_DIR)/check_pardo
	$(TEST_ENV) CK_RUN_SUITE=cuda_nn ./$(MOCK_DIR)/check_pardo
	$(TEST_ENV) CK_RUN_SUITE=cuda_train ./$(MOCK_DIR)/check_pardo
	$(TEST_ENV) CK_RUN_SUITE=synced_mem ./$(MOCK_DIR)/check_pardo
	$(TEST_ENV) CK_RUN_SUITE=device_stream ./$(MOCK_DIR)/check_pardo
	$(TEST_ENV) tests/gpu_mock_train_test.sh ./$(MOCK_DIR)/pardo
else
gpu-mock-test:
	@echo "gpu-mock-test: skipped (a CPU-only build has no GPU half: build with CUDA=1 where nvcc is found)"
endif

# The CLI tests' .npy comparison (tests/tools/npy_close.c), so make test needs no Python.
NPY_CLOSE := $(BUILD)/tests/tools/npy_close
$(NPY_CLOSE): %: %.o $(LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++)

# make onnx-test: the node tests' runner (it reads the models with the generated protobuf code, like the importer).
ONNX_TEST_BIN := $(BUILD)/tools/onnx_test/onnx_node_test
ONNX_TEST_DATA ?= /usr/share/libonnx-testdata/data/node
$(BUILD)/tools/onnx_test/onnx_node_test.o: CFLAGS += -I$(BUILD)/gen $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
$(BUILD)/tools/onnx_test/onnx_node_test.o: $(ONNX_GEN:.c=.h)
$(ONNX_TEST_BIN): %: %.o $(LIB)
	@echo "  LD    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++)
ifeq ($(ONNX),1)
onnx-test: $(ONNX_TEST_BIN)
	./$(ONNX_TEST_BIN) --data $(ONNX_TEST_DATA) --floor tests/onnx_pass_floor --table $(BUILD)/onnx_ops.md
else
onnx-test:
	@echo "onnx-test: skipped (this build has no ONNX support: make ONNX=1 with protobuf-c installed)"
endif

# ASan in a process that loads the CUDA runtime needs the shadow gap unprotected.
# Sanitizer builds run 3 to 10 times slower: give Check's per-test timeout room.
# The tests pin the matrix product to the own kernel and turn its pick off (no cache file is read or written;
# tests/check_gemm_pick.c sets its own environment).
TEST_ENV = CK_TIMEOUT_MULTIPLIER=$(if $(SANITIZE),4,1) \
           ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
           TSAN_OPTIONS=halt_on_error=1 PARDO_TEST_FIXTURES=tests/fixtures NPY_CLOSE=$(NPY_CLOSE) \
           PARDO_GEMM=own PARDO_GEMM_CACHE=off

# Every tests/cli*_test.sh script gets the binary's path; each prints "cli...: N passed, N failed".
CLI_TESTS := $(sort $(wildcard tests/cli*_test.sh))

test: $(TEST_BIN) $(BIN) $(NPY_CLOSE)
	$(TEST_ENV) ./$(TEST_BIN)
	@set -e; for t in $(CLI_TESTS); do echo "$(TEST_ENV) $$t ./$(BIN)"; $(TEST_ENV) $$t ./$(BIN); done
	@$(MAKE) --no-print-directory gpu-mock-test

unit: $(TEST_BIN)
	$(TEST_ENV) ./$(TEST_BIN)

cli: $(BIN) $(NPY_CLOSE)
	@set -e; for t in $(CLI_TESTS); do echo "$(TEST_ENV) $$t ./$(BIN)"; $(TEST_ENV) $$t ./$(BIN); done

asan:
	$(MAKE) SANITIZE=address,undefined OPT=-O1 test

tsan:
	$(MAKE) SANITIZE=thread OPT=-O1 test

# Not part of make test (which needs no valgrind): the CPU-only runs of tools/valgrind.sh under memcheck.
valgrind: $(BIN)
	tools/valgrind.sh ./$(BIN)

demo: $(BIN)
	tools/demo.sh ./$(BIN)

# A benchmark, not a test: prints figures and never fails for a missing peer (see tools/bench/run).
BENCH_ARGS ?=
bench: $(BENCH_BINS) $(BIN)
	tools/bench/run --build $(BUILD) $(BENCH_ARGS)

# make install: the binary, the library, the public headers under include/pardo/ and pardo.pc with the flags a
# program linking libpardo.a needs in this build (cJSON, libm, threads, and dl, CUDA or a sanitizer where the build
# has them): cc app.c $$(pkg-config --cflags --libs pardo). The public headers are what a program driving pardo
# includes (the engine; loading a graph or model, checking it, the executor, tensors, scopes, status; npy, CSV and
# safetensors files) and every header they include, each under its name relative to src/, ops/ or transpiler/
# (src/core/status.h is include/pardo/core/status.h; src/engine/engine.h is <pardo/engine.h>), so their own
# includes work with pardo.pc's -I$${includedir}/pardo. make uninstall removes exactly those files, then the
# folders under include/pardo it leaves empty. DESTDIR stages the files elsewhere.
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL ?= install
PARDO_VERSION := $(shell sed -n 's/^\#define PARDO_VERSION "\(.*\)"/\1/p' src/cli/version.h)
PC_LIBS = -L$${libdir} -lpardo $(DEP_LIBS) $(ONNX_LIBS) $(BLAS_LIBS) $(LDLIBS) $(if $(CU_SRC),-lstdc++) -pthread $(SAN_FLAGS)
PUBLIC_HEADERS := src/engine/engine.h src/core/status.h src/core/tensor.h src/core/tensor_list.h src/core/scope.h \
                  src/core/graph.h src/core/value.h src/core/device.h src/core/synced_mem.h src/exec/executor.h \
                  src/io/model_load.h src/io/npy.h src/io/csv.h src/io/safetensors.h ops/op.h transpiler/pass.h
header_dest = $(patsubst src/%,%,$(patsubst src/engine/%,%,$(patsubst ops/%,%,$(patsubst transpiler/%,%,$(1)))))
INSTALLED := bin/pardo lib/libpardo.a lib/pkgconfig/pardo.pc $(addprefix include/pardo/,$(call header_dest,$(PUBLIC_HEADERS)))
install: $(BIN) $(LIB)
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/pardo
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/pardo
	$(INSTALL) -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libpardo.a
	@set -e; for h in $(PUBLIC_HEADERS); do d=$${h#src/engine/}; d=$${d#src/}; d=$${d#ops/}; d=$${d#transpiler/}; \
	    echo "$(INSTALL) -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/pardo/$$d"; \
	    $(INSTALL) -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/pardo/$$d; done
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' 'Name: pardo' \
	    'Description: runs ML op graphs on CPU threads; the C API is under <pardo/...>, the engine <pardo/engine.h>' \
	    'Version: $(PARDO_VERSION)' 'Cflags: $(strip -I$${includedir} -I$${includedir}/pardo -pthread $(SAN_FLAGS))' \
	    'Libs: $(strip $(PC_LIBS))' >$(DESTDIR)$(PREFIX)/lib/pkgconfig/pardo.pc
	@echo "  installed pardo, libpardo.a, the headers under include/pardo and pardo.pc under $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	@for d in core exec io; do rmdir $(DESTDIR)$(PREFIX)/include/pardo/$$d 2>/dev/null || true; done; \
	    rmdir $(DESTDIR)$(PREFIX)/include/pardo 2>/dev/null || true

# Fuzzing, not a test (make test never runs it): fails when a case crashes, hangs, trips a sanitizer or fails
# without exit status 2 on bad input; the cases it finds land in build/fuzz-findings (see tools/fuzz/fuzz.py).
# The matrix product's pick is off there (timings under ASan would be cached as this machine's).
FUZZ_ARGS ?=
FUZZ_PYTHON ?= /usr/bin/python3
fuzz:
	$(MAKE) SANITIZE=address,undefined OPT=-O1 build-asan$(SUFFIX)/pardo
	PARDO_GEMM_CACHE=off $(FUZZ_PYTHON) tools/fuzz/fuzz.py --pardo build-asan$(SUFFIX)/pardo $(FUZZ_ARGS)

# every build folder: build, build-asan, build-tsan, each with any of the -nocuda, -noblas, -noonnx suffixes
clean:
	rm -rf build build-asan build-tsan $(foreach b,build build-asan build-tsan,$(wildcard $(b)-no*))

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(MOCK_OBJ:.o=.d) $(BUILD)/src/cli/main.d $(BENCH_BINS:=.d) $(ONNX_TEST_BIN).d $(NPY_CLOSE).d
