/* Task Bench kernels, validation and SipHash-2-4 for shoal.bench.taskbench.
 *
 * Built on first use by shoal/bench/taskbench/kernels.py with the system C compiler
 * and called through ctypes on NumPy buffers. Semantics follow the reference Task
 * Bench core (Slaughter et al., SC 2020): the same kernels with the same FLOP and byte
 * counts, the same (timestep, point) validation of inputs and outputs, the same
 * scratch sentinel, and the same SipHash keying for load_imbalance.
 */
#include <stdint.h>
#include <string.h>
#include <math.h>

/* ------------------------------------------------------------------ SipHash-2-4 */

static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

#define SIP_ROUND()                                                        \
    do {                                                                   \
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);          \
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                             \
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                             \
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);          \
    } while (0)

/* SipHash-2-4 with a 64-bit output of `len` bytes at `in` under the 16-byte `key`. */
uint64_t tb_siphash24(const uint8_t *in, int64_t len, const uint8_t *key)
{
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
    uint64_t v3 = k1 ^ 0x7465646279746573ULL;
    int64_t whole = len - (len % 8);
    for (int64_t off = 0; off < whole; off += 8) {
        uint64_t m = load_le64(in + off);
        v3 ^= m;
        SIP_ROUND(); SIP_ROUND();
        v0 ^= m;
    }
    uint64_t last = ((uint64_t)len & 0xff) << 56;
    for (int64_t i = len - 1; i >= whole; --i) last |= (uint64_t)in[i] << (8 * (i - whole));
    v3 ^= last;
    SIP_ROUND(); SIP_ROUND();
    v0 ^= last;
    v2 ^= 0xff;
    SIP_ROUND(); SIP_ROUND(); SIP_ROUND(); SIP_ROUND();
    return v0 ^ v1 ^ v2 ^ v3;
}

/* Task Bench's deterministic "random" number in [0, 1): SipHash-2-4 of the raw bytes
 * of an array of C longs, under the key bytes 1, 2, ..., 15, 0. */
double tb_random_uniform(const int64_t *values, int64_t count)
{
    static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0};
    uint8_t bytes[8 * 16];
    if (count > 16) return -1.0;
    for (int64_t i = 0; i < count; ++i) {
        uint64_t v = (uint64_t)values[i];
        for (int b = 0; b < 8; ++b) bytes[8 * i + b] = (uint8_t)(v >> (8 * b));
    }
    return (double)tb_siphash24(bytes, 8 * count, key) * 0x1.p-64;
}

/* ------------------------------------------------------------------ kernels */

enum { K_EMPTY = 0, K_BUSY_WAIT = 1, K_MEMORY_BOUND = 2, K_COMPUTE_BOUND = 3,
       K_COMPUTE_BOUND2 = 4, K_LOAD_IMBALANCE = 5 };

typedef struct {
    int64_t type;
    int64_t iterations;
    int64_t samples;
    double imbalance;
    int64_t graph_index;
} tb_kernel_t;

/* Results land here so that the compiler cannot drop a kernel's loop. */
volatile double tb_sink_double;
volatile int64_t tb_sink_long;

int64_t tb_imbalance_iterations(const tb_kernel_t *k, int64_t timestep, int64_t point)
{
    int64_t seed[3] = {k->graph_index, timestep, point};
    double value = tb_random_uniform(seed, 3);
    return (int64_t)round((1.0 + (value - 0.5) * k->imbalance) * (double)k->iterations);
}

static int64_t busy_wait(int64_t iterations)
{
    int64_t acc = 113;
    for (int64_t i = 0; i < iterations; ++i) acc = acc * 139 % 2147483647;
    return acc;
}

/* 64 independent multiply-adds per iteration: 2 * 64 FLOPs, plus 64 for the product. */
static double compute_bound(int64_t iterations)
{
    double a[64];
    for (int i = 0; i < 64; ++i) a[i] = 1.2345;
    for (int64_t it = 0; it < iterations; ++it)
        for (int i = 0; i < 64; ++i) a[i] = a[i] * a[i] + a[i];
    double product = 1.0;
    for (int i = 0; i < 64; ++i) product *= a[i];
    return product;
}

/* 32 multiply-accumulates per iteration: 2 * 32 FLOPs. */
static double compute_bound2(int64_t iterations)
{
    double a[32], b[32], c[32];
    for (int i = 0; i < 32; ++i) { a[i] = 1.2345; b[i] = 1.010101; c[i] = 0.0; }
    for (int64_t it = 0; it < iterations; ++it)
        for (int i = 0; i < 32; ++i) c[i] = c[i] + a[i] * b[i];
    double sum = 0.0;
    for (int i = 0; i < 32; ++i) sum += c[i];
    return sum;
}

/* Copy the first half of a region of the scratch buffer onto its second half. */
static void copy_half(char *ptr, int64_t bytes)
{
    memmove(ptr + bytes / 2, ptr, (size_t)(bytes / 2));
}

/* `iterations` samples of scratch/samples bytes each, starting where the previous
 * timestep stopped and wrapping around the scratch buffer, copied in at most three
 * contiguous runs (to the end, whole passes, the rest), as the reference does. */
static void memory_bound(const tb_kernel_t *k, char *scratch, int64_t scratch_bytes, int64_t timestep)
{
    int64_t samples = k->samples, iterations = k->iterations, done = 0;
    int64_t sample_bytes = scratch_bytes / samples;
    int64_t start = (timestep * iterations) % samples;
    int64_t first = samples - start < iterations ? samples - start : iterations;
    if (first > 0) {
        copy_half(scratch + start * sample_bytes, first * sample_bytes);
        done += first;
    }
    for (; done + samples <= iterations; done += samples) copy_half(scratch, samples * sample_bytes);
    if (iterations - done > 0) {
        copy_half(scratch, (iterations - done) * sample_bytes);
    }
}

/* ------------------------------------------------------------------ one task */

#define TB_MAGIC UINT64_C(0x5C4A7C8B) /* the reference's scratch sentinel */

enum { TB_OK = 0, TB_BAD_INPUT_SIZE = 1, TB_BAD_INPUT_VALUE = 2, TB_BAD_OUTPUT_SIZE = 3,
       TB_BAD_SCRATCH = 4, TB_BAD_KERNEL = 5 };

/* Everything about one point that does not change from task to task. */
typedef struct {
    tb_kernel_t kernel;
    char *output;
    int64_t output_bytes;
    const char *inputs;      /* row k of a (max_inputs, output_bytes) array */
    int64_t input_stride;
    const int64_t *input_bytes; /* size of each input as received */
    char *scratch;
    int64_t scratch_bytes;
    /* filled in when a task fails */
    int64_t err_input, err_position, err_timestep, err_point;
} tb_point_t;

void tb_prepare_scratch(char *scratch, int64_t bytes)
{
    uint64_t *words = (uint64_t *)scratch;
    for (int64_t i = 0; i < bytes / 8; ++i) words[i] = TB_MAGIC;
}

/* Check the inputs of task (timestep, point) against the producers `deps`, write its
 * output, check the scratch sentinel, run its kernel. Returns TB_OK or an error code,
 * with the failing input, position and found values recorded in `pt`. */
int64_t tb_execute_point(tb_point_t *pt, int64_t timestep, int64_t point,
                         const int64_t *deps, int64_t n_deps)
{
    for (int64_t k = 0; k < n_deps; ++k) {
        if (pt->input_bytes[k] != pt->output_bytes) {
            pt->err_input = k;
            pt->err_position = pt->input_bytes[k];
            return TB_BAD_INPUT_SIZE;
        }
        const int64_t *pairs = (const int64_t *)(pt->inputs + k * pt->input_stride);
        int64_t n_pairs = pt->output_bytes / 16;
        for (int64_t i = 0; i < n_pairs; ++i) {
            if (pairs[2 * i] != timestep - 1 || pairs[2 * i + 1] != deps[k]) {
                pt->err_input = k;
                pt->err_position = i;
                pt->err_timestep = pairs[2 * i];
                pt->err_point = pairs[2 * i + 1];
                return TB_BAD_INPUT_VALUE;
            }
        }
    }
    if (pt->output_bytes < 16) return TB_BAD_OUTPUT_SIZE;
    int64_t *out = (int64_t *)pt->output;
    for (int64_t i = 0; i < pt->output_bytes / 16; ++i) {
        out[2 * i] = timestep;
        out[2 * i + 1] = point;
    }
    if (pt->scratch_bytes > 0 && *(const uint64_t *)pt->scratch != TB_MAGIC) {
        pt->err_timestep = (int64_t)*(const uint64_t *)pt->scratch;
        return TB_BAD_SCRATCH;
    }
    const tb_kernel_t *k = &pt->kernel;
    switch (k->type) {
    case K_EMPTY:
        break;
    case K_BUSY_WAIT:
        tb_sink_long = busy_wait(k->iterations);
        break;
    case K_MEMORY_BOUND:
        if (pt->scratch_bytes <= 0 || k->samples <= 0) return TB_BAD_KERNEL;
        memory_bound(k, pt->scratch, pt->scratch_bytes, timestep);
        break;
    case K_COMPUTE_BOUND:
        tb_sink_double = compute_bound(k->iterations);
        break;
    case K_COMPUTE_BOUND2:
        tb_sink_double = compute_bound2(k->iterations);
        break;
    case K_LOAD_IMBALANCE:
        tb_sink_double = compute_bound(tb_imbalance_iterations(k, timestep, point));
        break;
    default:
        return TB_BAD_KERNEL;
    }
    return TB_OK;
}

/* Run only the kernel, `count` times (for measuring peak rates). */
void tb_run_kernel(const tb_kernel_t *k, int64_t count)
{
    for (int64_t i = 0; i < count; ++i) {
        if (k->type == K_COMPUTE_BOUND || k->type == K_LOAD_IMBALANCE) tb_sink_double = compute_bound(k->iterations);
        else if (k->type == K_COMPUTE_BOUND2) tb_sink_double = compute_bound2(k->iterations);
        else if (k->type == K_BUSY_WAIT) tb_sink_long = busy_wait(k->iterations);
    }
}
