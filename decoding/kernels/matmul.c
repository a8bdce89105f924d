/* What Python calls (decoding/qkernel.py, through ctypes): y = x @ W.T for quantized W, rows of
 * embeddings, and the thread pool that splits a matmul's output columns.
 *
 * Each output value y[m, n] is one dot product, computed whole by one thread in one fixed order,
 * so the bits of a row do not depend on how many rows share the call or on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "matmul.h"
#include "pool.h"

enum { Q4_K = 12, Q6_K = 14, Q8_0 = 8 };  /* GGML's type numbers */
enum { PAIRED = 100, Q4_K_PAIRED = Q4_K + PAIRED, Q6_K_PAIRED = Q6_K + PAIRED };  /* layout.c's layout */

/* one weight row against `rows` (1..ROWS) activation rows `stride` bytes apart */
typedef void (*dot_fn)(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out);
typedef void (*quant_fn)(const float *x, void *out, int k);

static void q4k_rows(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    for (int r = 0; r < rows; r++) out[r] = dot_q4k(w, (const act_k *)(x + stride * r), k);
}

static void q6k_rows(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    for (int r = 0; r < rows; r++) out[r] = dot_q6k(w, (const act_k *)(x + stride * r), k);
}

/* a paired weight row of `bytes` copied into `copy` in the file's layout: how the portable code
 * reads one */
static const void *unpaired(int type, const void *row, size_t bytes, void *copy) {
    memcpy(copy, row, bytes);
    if (type == Q4_K_PAIRED) q4k_relayout(copy, bytes / sizeof(block_q4k), 0);
    else q6k_relayout(copy, bytes / sizeof(block_q6k), 0);
    return copy;
}

static void q4k_paired_rows(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    block_q4k copy[k / QK];
    q4k_rows(unpaired(Q4_K_PAIRED, w, sizeof copy, copy), x, stride, rows, k, out);
}

static void q6k_paired_rows(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    block_q6k copy[k / QK];
    q6k_rows(unpaired(Q6_K_PAIRED, w, sizeof copy, copy), x, stride, rows, k, out);
}

static void q80_rows(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    for (int r = 0; r < rows; r++) out[r] = dot_q80(w, (const act_32 *)(x + stride * r), k);
}

#if defined(__x86_64__) || defined(_M_X64)
static void q80_rows_avx2(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) {
    for (int r = 0; r < rows; r++) out[r] = dot_q80_avx2(w, (const act_32 *)(x + stride * r), k);
}

/* the K-quant bodies of `level`, as dot_fn: they take the activation rows' stride in blocks */
#define KQUANT_ROWS(level)                                                                                   \
    static void q4k_rows_##level(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) { \
        dot_q4k_##level(w, (const act_k *)x, (int)(stride / sizeof(act_k)), rows, k, out);                    \
    }                                                                                                          \
    static void q6k_rows_##level(const void *w, const uint8_t *x, size_t stride, int rows, int k, float *out) { \
        dot_q6k_##level(w, (const act_k *)x, (int)(stride / sizeof(act_k)), rows, k, out);                    \
    }
KQUANT_ROWS(avx2)
KQUANT_ROWS(avx2_paired)
KQUANT_ROWS(avxvnni)
KQUANT_ROWS(avx512)
#endif

enum { PORTABLE, AVX2, AVXVNNI, AVX512 };
static int level = -1;  /* the kernels in use; -1: not decided yet */

/* Whether this CPU runs the kernels of `wanted`: AVX2 needs FMA and F16C besides; AVX-VNNI is
 * AVX2's with the 256-bit VNNI of Alder Lake and Zen 5; AVX-512 needs AVX512BW (bytes and words),
 * VL and VNNI. A CPU may have AVX-512 and not AVX-VNNI (Ice Lake, Zen 4): each is asked alone. */
static int cpu_runs(int wanted) {
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    switch (wanted) {
    case PORTABLE: return 1;
    case AVX2: return avx2;
    case AVXVNNI: return avx2 && __builtin_cpu_supports("avxvnni");
    case AVX512: return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    }
    return 0;
#else
    return wanted == PORTABLE;
#endif
}

/* the highest level at or below `wanted` that this CPU runs */
static int highest(int wanted) {
    while (!cpu_runs(wanted)) wanted--;
    return wanted;
}

/* The best kernels this CPU runs: 0 portable, 1 AVX2, 2 AVX-VNNI, 3 AVX-512. */
int specd_kernel_best(void) {
    return highest(AVX512);
}

/* The kernels that run here (as above). `force` 0..3 chooses (for tests and comparisons): the
 * highest this CPU runs at or below it. -1 asks. */
int specd_kernel_level(int force) {
    if (force >= 0) level = highest(force < AVX512 ? force : AVX512);
    if (level < 0) level = specd_kernel_best();
    return level;
}

/* A matmul's two halves: how its activation rows are quantized, and the dot product that reads them */
typedef struct {
    dot_fn dot;
    quant_fn quant;
} kernel;

static kernel pick(int type) {
#if defined(__x86_64__) || defined(_M_X64)
    int here = specd_kernel_level(-1);
    quant_fn k_avx2 = (quant_fn)quantize_k_avx2, paired = (quant_fn)quantize_k_avx2_paired;
    if (here >= AVX2 && type == Q4_K_PAIRED) return (kernel){q4k_rows_avx2_paired, paired};
    if (here >= AVX2 && type == Q6_K_PAIRED) return (kernel){q6k_rows_avx2_paired, paired};
    if (here == AVX512 && (type == Q4_K || type == Q6_K))
        return (kernel){type == Q4_K ? q4k_rows_avx512 : q6k_rows_avx512, k_avx2};
    if (here == AVXVNNI && (type == Q4_K || type == Q6_K))
        return (kernel){type == Q4_K ? q4k_rows_avxvnni : q6k_rows_avxvnni, k_avx2};
    if (here >= AVX2) {
        switch (type) {
        case Q4_K: return (kernel){q4k_rows_avx2, k_avx2};
        case Q6_K: return (kernel){q6k_rows_avx2, k_avx2};
        case Q8_0: return (kernel){q80_rows_avx2, (quant_fn)quantize_32_avx2};
        }
    }
#endif
    switch (type) {
    case Q4_K: return (kernel){q4k_rows, (quant_fn)quantize_k};
    case Q6_K: return (kernel){q6k_rows, (quant_fn)quantize_k};
    case Q4_K_PAIRED: return (kernel){q4k_paired_rows, (quant_fn)quantize_k};
    case Q6_K_PAIRED: return (kernel){q6k_paired_rows, (quant_fn)quantize_k};
    case Q8_0: return (kernel){q80_rows, (quant_fn)quantize_32};
    }
    return (kernel){NULL, NULL};
}

/* The type that `type`'s weights are best laid out as for the kernels in use: the paired layout
 * where those are AVX2's (a K-quant's one multiply fewer per 64 weights; VNNI and AVX-512 fuse
 * that multiply already), else `type` itself. */
int specd_layout(int type) {
    int here = specd_kernel_level(-1);
    return here == AVX2 && (type == Q4_K || type == Q6_K) ? type + PAIRED : type;
}

/* `count` blocks of `from` in place as `to` (from == to, or to == specd_layout(from) of a
 * K-quant, or back). Returns 0, or -1 for any other pair. */
int specd_relayout(int from, int to, void *w, size_t count) {
    int simd = specd_kernel_level(-1) >= AVX2;
    if (from == to) return 0;
    if (from == Q4_K && to == Q4_K_PAIRED) {
#if defined(__x86_64__) || defined(_M_X64)
        if (simd) return relayout_q4k_avx2(w, count), 0;
#endif
        return q4k_relayout(w, count, 1), 0;
    }
    if (from == Q6_K && to == Q6_K_PAIRED) {
#if defined(__x86_64__) || defined(_M_X64)
        if (simd) return relayout_q6k_avx2(w, count), 0;
#endif
        return q6k_relayout(w, count, 1), 0;
    }
    if (from == Q4_K_PAIRED && to == Q4_K) return q4k_relayout(w, count, 0), 0;
    if (from == Q6_K_PAIRED && to == Q6_K) return q6k_relayout(w, count, 0), 0;
    return -1;
}

/* bytes of activation blocks for one row of k values (the Python side sizes scratch with it) */
int specd_act_bytes(int type, int k) {
    type %= PAIRED;
    return type == Q8_0 ? k / QB * (int)sizeof(act_32) : k / QK * (int)sizeof(act_k);
}

static size_t row_bytes(int type, int k) {
    switch (type % PAIRED) {
    case Q4_K: return (size_t)(k / QK) * sizeof(block_q4k);
    case Q6_K: return (size_t)(k / QK) * sizeof(block_q6k);
    case Q8_0: return (size_t)(k / QB) * sizeof(block_q80);
    }
    return 0;
}

typedef struct {
    dot_fn dot;
    const uint8_t *w;
    size_t stride;       /* bytes per weight row */
    const uint8_t *x;
    size_t x_stride;     /* bytes per activation row */
    int m, n, k;
    float *y;
    const float *bias;   /* [n] or NULL: added to each output, one float add (as torch's y + bias) */
} matmul_job;

#define COLUMNS 16       /* weight rows kept in L1 while every activation row passes them */

static void matmul_part(void *arg, int start, int end) {
    const matmul_job *job = arg;
    for (int n0 = start; n0 < end; n0 += COLUMNS) {
        int n1 = n0 + COLUMNS < end ? n0 + COLUMNS : end;
        for (int m = 0; m < job->m; m += ROWS) {
            int rows = job->m - m < ROWS ? job->m - m : ROWS;
            const uint8_t *x = job->x + job->x_stride * m;
            float out[ROWS];
            for (int n = n0; n < n1; n++) {
                job->dot(job->w + job->stride * n, x, job->x_stride, rows, job->k, out);
                float b = job->bias ? job->bias[n] : 0.0f;
                for (int r = 0; r < rows; r++) job->y[(size_t)(m + r) * job->n + n] = job->bias ? out[r] + b : out[r];
            }
        }
    }
}

/* y [m, n] = x [m, k] (float) @ W.T (+ bias [n], unless NULL), W [n, k] in `type` blocks. Returns
 * 0, or -1 for a type or shape it cannot take (Python checks first; this is the last guard).
 * `scratch` holds m * specd_act_bytes(type, k) bytes. */
int specd_matmul(int type, const void *w, int n, int k, const float *x, int m, float *y, uint8_t *scratch,
                 const float *bias) {
    linear layer = {type, n, w, bias};
    return matmul_many(&layer, 1, k, x, m, &y, scratch);
}

/* matmul_many's work: the layers' columns end to end, each range run by matmul_part of its own */
typedef struct {
    int count;
    int first[MANY + 1];   /* layer i's columns are [first[i], first[i + 1]) of the whole */
    matmul_job jobs[MANY];
} many_job;

static void many_part(void *arg, int start, int end) {
    const many_job *job = arg;
    for (int i = 0; i < job->count; i++) {
        int lo = start > job->first[i] ? start : job->first[i];
        int hi = end < job->first[i + 1] ? end : job->first[i + 1];
        if (lo < hi) matmul_part((void *)&job->jobs[i], lo - job->first[i], hi - job->first[i]);
    }
}

size_t matmul_scratch(int k, int m) {
    return (size_t)m * (size_t)(specd_act_bytes(Q4_K, k) + specd_act_bytes(Q8_0, k));
}

int matmul_many(const linear *layers, int count, int k, const float *x, int m, float **y, uint8_t *scratch) {
    if (count < 1 || count > MANY || m <= 0) return -1;
    many_job job = {.count = count};
    /* at most two activation formats: the K-quants' (per 256) and Q8_0's (per 32; the paired
     * layout quantizes its own way, in the K-quants' place), each in scratch after the one
     * quantized before it: one layer's call needs only m * specd_act_bytes(type, k) */
    quant_fn done[2] = {NULL, NULL};
    uint8_t *slot[2] = {NULL, NULL}, *unused = scratch;
    for (int i = 0; i < count; i++) {
        kernel use = pick(layers[i].type);
        if (use.dot == NULL || k % (layers[i].type == Q8_0 ? QB : QK) != 0 || layers[i].n <= 0) return -1;
        int s = layers[i].type % PAIRED == Q8_0;
        if (done[s] != NULL && done[s] != use.quant) return -1;   /* two K-quant layouts in one call */
        size_t stride = (size_t)specd_act_bytes(layers[i].type, k);
        if (done[s] == NULL) {
            slot[s] = unused, unused += stride * (size_t)m;
            for (int r = 0; r < m; r++) use.quant(x + (size_t)r * k, slot[s] + stride * r, k);
        }
        done[s] = use.quant;
        job.jobs[i] = (matmul_job){use.dot, layers[i].w, row_bytes(layers[i].type, k), slot[s], stride, m,
                                   layers[i].n, k, y[i], layers[i].bias};
        job.first[i + 1] = job.first[i] + layers[i].n;
    }
    pool_run(many_part, &job, job.first[count], COLUMNS);
    return 0;
}

static void dequant_q4k(const block_q4k *w, int k, float *out) {
    uint8_t q[QK];
    for (int b = 0; b < k / QK; b++, w++) {
        float d = fp16_to_float(w->d), dmin = fp16_to_float(w->dmin);
        q4k_values(w, q);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            q4k_scale_min(w->scales, j, &sc, &m);
            for (int i = 0; i < 32; i++) *out++ = d * sc * q[32 * j + i] - dmin * m;
        }
    }
}

static void dequant_q6k(const block_q6k *w, int k, float *out) {
    uint8_t q[QK];
    for (int b = 0; b < k / QK; b++, w++) {
        float d = fp16_to_float(w->d);
        q6k_values(w, q);
        for (int i = 0; i < QK; i++) *out++ = d * w->scales[i / 16] * (q[i] - 32);
    }
}

static void dequant_q80(const block_q80 *w, int k, float *out) {
    for (int b = 0; b < k / QB; b++, w++) {
        float d = fp16_to_float(w->d);
        for (int i = 0; i < QB; i++) *out++ = d * w->qs[i];
    }
}

/* out [count, k] = the float rows `ids` of W (an embedding's lookup). Returns 0, or -1. */
int specd_rows(int type, const void *w, int k, const int64_t *ids, int count, float *out) {
    size_t stride = row_bytes(type, k);
    if (stride == 0 || k % (type == Q8_0 ? QB : QK) != 0) return -1;
    for (int r = 0; r < count; r++, out += k) {
        const void *row = (const uint8_t *)w + stride * (size_t)ids[r];
        uint8_t copy[type > PAIRED ? stride : 1];
        if (type > PAIRED) row = unpaired(type, row, stride, copy);
        switch (type % PAIRED) {
        case Q4_K: dequant_q4k(row, k, out); break;
        case Q6_K: dequant_q6k(row, k, out); break;
        case Q8_0: dequant_q80(row, k, out); break;
        }
    }
    return 0;
}
