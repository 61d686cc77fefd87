/* init_fill.h - deterministic fills of a tensor from a pardo_init (SPEC.md
 * section 1, a var's "init"): constant, uniform, normal, xavier_uniform and
 * kaiming_uniform. The executor initialises params and state with it; the
 * fill op runs it as a kernel.
 *
 * Random fills are counter-based: element i's value is a function of (seed,
 * i) only (splitmix64 of the counter, normal pairs by Box-Muller), so a
 * given seed gives the same tensor on every machine, thread count and run.
 * Fans follow PyTorch's _calculate_fan_in_and_fan_out, with pardo's layout of
 * 2-D weights: [in, out] (used as x @ W), so fan_in = shape[0], fan_out =
 * shape[1]; rank > 2 (conv weights [out, in, kh, kw]): fan_in = in * kh * kw,
 * fan_out = out * kh * kw; rank 1: fan_in = fan_out = shape[0].
 * xavier_uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
 * kaiming_uniform: U(-b, b), b = sqrt(6 / fan_in), the plain He form (PyTorch's
 * kaiming_uniform_ with a = 0; not nn.Linear's default a = sqrt(5)). */
#ifndef PARDO_INIT_FILL_H
#define PARDO_INIT_FILL_H

#include <stdint.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor.h"

/* Checks that init can fill a tensor of dtype dt and shape (ndim, shape):
 * a known fill, constant for any dtype (in range for ints), random fills for float32/float64
 * only, low <= high, std >= 0, finite parameters, rank >= 1 for the fan-based
 * fills. Returns PARDO_OK or PARDO_EINVAL naming the key ('low', 'std', ...)
 * and what was expected. Thread-safe. */
int pardo_init_check(const pardo_init *init, pardo_dtype dt, int ndim, const int64_t *shape, pardo_status *st);

/* Fan-in and fan-out of a weight of the given shape (see above); PARDO_EINVAL
 * for a scalar. */
int pardo_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out, pardo_status *st);

/* Writes every element of t (on the CPU; moves its head there) as init
 * says. Borrows t and init. Returns PARDO_OK, PARDO_EINVAL as
 * pardo_init_check does, or an error from getting t's host memory.
 * Thread-safe for distinct tensors. */
int pardo_init_fill(pardo_tensor *t, const pardo_init *init, pardo_status *st);

#endif
