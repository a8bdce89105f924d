/* Attention on the CPU for float32 passes (decoding/lean.py through decoding/qkernel.py) over a
 * cache of IEEE halves (half.h: half the bytes a width-1 pass waits for): each query
 * row computed whole by one thread, alone (attend.h), so a row's bits never depend on the rows
 * beside it; torch's flash attention splits queries into blocks whose shape depends on the pass
 * (decoding/attention.py pads around that). The query heads sharing a key/value head, and up to
 * eight rows of a pass, sweep its keys together, block by block, so a thread reads each block
 * from memory once and the other heads and rows find it in the core's cache (a verify pass's
 * attention at 4-8 rows: 16-18% faster than a sweep per row, the same bits).
 * This file holds the portable body (the AVX2 one, attend_avx2.c, computes the same bits) and
 * what Python calls.
 */
#include <math.h>
#include <stddef.h>

#include "attend.h"
#include "pool.h"

int specd_kernel_level(int force);

/* e^x for x <= 0: attend.h's operations, one value at a time */
static float exp_neg(float x) {
    x = x > EXP_LOW ? x : EXP_LOW;
    float n = rintf(x * LOG2E);
    float r = fmaf(n, -LN2_HI, x);
    r = fmaf(n, -LN2_LO, r);
    float y = fmaf(fmaf(fmaf(fmaf(fmaf(EXP_P0, r, EXP_P1), r, EXP_P2), r, EXP_P3), r, EXP_P4), r, EXP_P5);
    y = fmaf(y, r * r, r) + 1.0f;
    union { int32_t i; float f; } two = {.i = ((int32_t)n + 127) << 23};
    return y * two.f;
}

/* q . k in eight lanes (lane l sums the products d = l mod 8, fused, in order) and lanes8.h's
 * reduction: the AVX2 body's order */
static float dot8(const float *a, const uint16_t *b, int d) {
    float lane[8] = {0};
    for (int i = 0; i < d; i += 8)
        for (int l = 0; l < 8; l++) lane[l] = fmaf(a[i + l], half_to_float(b[i + l]), lane[l]);
    float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
    return (s0 + s2) + (s1 + s3);
}

/* one head's block of n keys from key b: its scores, the running top and sum rescaled, acc updated */
static void block(const float *q, const uint16_t *k, const uint16_t *v, int d, int b, int n, float scale, float *acc,
                  float *top, float *sum) {
    float p[KEYS], was = *top;
    for (int j = 0; j < n; j++) {
        p[j] = dot8(q, k + (size_t)(b + j) * d, d) * scale;
        *top = p[j] > *top ? p[j] : *top;
    }
    float c = exp_neg(was - *top);      /* the earlier blocks' weights, rescaled to the new top */
    *sum *= c;
    for (int j = 0; j < n; j++) {
        p[j] = exp_neg(p[j] - *top);
        *sum += p[j];
    }
    for (int i = 0; i < d; i++) {
        float a = acc[i] * c;
        for (int j = 0; j < n; j++) a = fmaf(p[j], half_to_float(v[(size_t)(b + j) * d + i]), a);
        acc[i] = a;
    }
}

void attend_heads(const float *q, int rows, size_t stride, int count, const uint16_t *k, const uint16_t *v, int d,
                  int last, float scale, float *out) {
    float acc[ROWS_AT_ONCE][HEADS_AT_ONCE][MAX_DIM];  /* 64 KB at most: on the stack */
    float top[ROWS_AT_ONCE][HEADS_AT_ONCE], sum[ROWS_AT_ONCE][HEADS_AT_ONCE];
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < count; h++) {
            for (int i = 0; i < d; i++) acc[r][h][i] = 0.0f;
            top[r][h] = -INFINITY, sum[r][h] = 0.0f;
        }
    for (int b = 0; b <= last + rows - 1; b += KEYS) {
        attend_ahead(k, v, d, b, last + rows - 1);
        for (int r = 0; r < rows; r++) {
            int n = last + r + 1 - b < KEYS ? last + r + 1 - b : KEYS;
            for (int h = 0; n > 0 && h < count; h++)
                block(q + r * stride + (size_t)h * d, k, v, d, b, n, scale, acc[r][h], &top[r][h], &sum[r][h]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < count; h++)
            for (int i = 0; i < d; i++) out[r * stride + (size_t)h * d + i] = acc[r][h][i] / sum[r][h];
}

typedef struct {
    attend_fn sweep;
    const float *q;          /* [s, heads, d] */
    const uint16_t *k, *v;   /* [kv_heads, capacity, d] halves */
    int heads, groups, per, chunks, s, d, start, capacity;
    float scale;
    float *out;              /* [s, heads, d] */
} attend_job;

/* units [start, end): unit u is kv head u / (bands * chunks), then its band of ROWS_AT_ONCE query
 * rows, then its chunk of `per` heads in the group */
static void attend_part(void *arg, int start, int end) {
    const attend_job *job = arg;
    int bands = (job->s + ROWS_AT_ONCE - 1) / ROWS_AT_ONCE, per_head = bands * job->chunks;
    size_t stride = (size_t)job->heads * job->d;
    for (int u = start; u < end; u++) {
        int g = u / per_head, r = u % per_head / job->chunks * ROWS_AT_ONCE, first = u % job->chunks * job->per;
        int count = job->groups - first < job->per ? job->groups - first : job->per;
        int rows = job->s - r < ROWS_AT_ONCE ? job->s - r : ROWS_AT_ONCE;
        size_t at = (size_t)r * stride + ((size_t)g * job->groups + first) * job->d;
        size_t head = (size_t)g * job->capacity * job->d;
        job->sweep(job->q + at, rows, stride, count, job->k + head, job->v + head, job->d, job->start + r,
                   job->scale, job->out + at);
    }
}

/* Heads per unit: as many of a group as keep every thread busy (a width-1 pass on 2 threads: one
 * kv head's whole group each, its keys read once), at most HEADS_AT_ONCE. Speed only: each head's
 * bits are the same however the heads and rows are grouped. */
static int heads_per_unit(int groups, int kv_heads, int bands) {
    int per = groups * kv_heads * bands / pool_threads();
    per = per < 1 ? 1 : per > HEADS_AT_ONCE ? HEADS_AT_ONCE : per;
    return per < groups ? per : groups;
}

/* out [s, heads, d] = attention of q [s, heads, d] (row r at position start + r) over the keys and
 * values [kv_heads, capacity, d] (halves) written so far, each head h reading kv head
 * h / (heads / kv_heads).
 * Returns 0, or -1 for a shape it cannot take (Python checks first; this is the last guard). */
int specd_attend(const float *q, int s, int heads, int kv_heads, int d, const uint16_t *k, const uint16_t *v,
                 int capacity, int start, float scale, float *out) {
    if (s <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || d % 8 != 0 || d > MAX_DIM || start < 0 ||
        start + s > capacity)
        return -1;
    attend_fn sweep = attend_heads;
#if defined(__x86_64__) || defined(_M_X64)
    if (specd_kernel_level(-1) >= 1) sweep = attend_heads_avx2;
#endif
    int groups = heads / kv_heads, bands = (s + ROWS_AT_ONCE - 1) / ROWS_AT_ONCE;
    int per = heads_per_unit(groups, kv_heads, bands), chunks = (groups + per - 1) / per;
    attend_job job = {sweep, q, k, v, heads, groups, per, chunks, s, d, start, capacity, scale, out};
    pool_run(attend_part, &job, kv_heads * bands * chunks, 1);
    return 0;
}

/* out[0..n) = x[0..n) rounded to halves (half.h), as layer.c writes the cache: what the torch ops'
 * passes (decoding/lean.py) write, so both write the same bits */
void specd_halves(const float *x, size_t n, uint16_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = half_from_float(x[i]);
}
