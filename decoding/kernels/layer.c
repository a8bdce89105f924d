/* One decoder layer of a Llama-shaped model (Qwen2, Llama) with block weights, for `s` rows, in one
 * call from Python (decoding/fused.py): the ~40 small torch ops and seven matmul calls a layer took
 * between its matmuls cost ~5 ms of a ~45 ms width-1 pass of the built-in target on 2 cores.
 *
 * The phases, each a function below: norm, the q/k/v projections in one pool call, rotary, the
 * cache write, attention (attend.c), the output projection and the residual, norm, gate and up in
 * one pool call, SiLU times up, down and the residual. Every value is computed from its own row
 * alone, in one fixed order (the matmuls and attention as specd_matmul and specd_attend compute
 * them; the rest plain scalar float code, built with -ffp-contract=off), so a row's bits never
 * depend on the pass's width, the thread count or the kernels' body. Rotary and the residual adds
 * round as torch's ops do; the norm and SiLU are specd's own.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "matmul.h"

int specd_attend(const float *q, int s, int heads, int kv_heads, int d, const uint16_t *k, const uint16_t *v,
                 int capacity, int start, float scale, float *out);
void specd_halves(const float *x, size_t n, uint16_t *out);

/* Where a layer's time goes, for `specd bench --profile` (decoding/profile.py): seconds per phase
 * since timing was last turned on, while it is on. */
enum { MATMULS, ATTENTION, NORMS_ROTARY, CACHE_WRITES, OTHER, PHASES };
static int timing;
static double spent[PHASES];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the time since *mark to phase `phase`, and *mark moved to now (nothing while timing is off) */
static void charge(int phase, double *mark) {
    if (!timing) return;
    double t = now();
    spent[phase] += t - *mark;
    *mark = t;
}

/* on: 1 starts timing afresh, 0 stops; `out` (PHASES doubles, or NULL) gets the seconds so far */
void specd_layer_timing(int on, double *out) {
    if (out != NULL) memcpy(out, spent, sizeof spent);
    if (on) memset(spent, 0, sizeof spent);
    timing = on;
}

/* A layer's weights and shape; mirrored by decoding/fused.py's Layer. */
typedef struct {
    linear q, k, v, o, gate, up, down;
    const float *norm1, *norm2;      /* [hidden] */
    float eps, scale;                /* the norms' epsilon; attention's 1 / sqrt(d) */
    int hidden, heads, kv_heads, d, inter;
} layer;

/* out = x / sqrt(mean(x^2) + eps) * w, the squares summed in eight lanes as attend.c's dot8 sums */
static void norm(const float *x, const float *w, int n, float eps, float *out) {
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) lane[l] += x[i + l] * x[i + l];
    for (; i < n; i++) lane[0] += x[i] * x[i];
    float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    float inv = 1.0f / sqrtf(sum / (float)n + eps);
    for (i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

static void norms(const float *x, const float *w, int s, int n, float eps, float *out) {
    for (int r = 0; r < s; r++) norm(x + (size_t)r * n, w, n, eps, out + (size_t)r * n);
}

/* x * cos + rotate_half(x) * sin for each of `heads` heads of each row, rounded as torch's three
 * ops round it (lean.py's _rotate): cos and sin [s, d] */
static void rotary(float *x, int s, int heads, int d, const float *cos, const float *sin) {
    int half = d / 2;
    float t[d];
    for (int r = 0; r < s; r++)
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)r * heads + h) * d;
            const float *c = cos + (size_t)r * d, *n = sin + (size_t)r * d;
            for (int i = 0; i < d; i++) {
                float turned = i < half ? -v[i + half] : v[i - half];
                float a = v[i] * c[i], b = turned * n[i];
                t[i] = a + b;
            }
            memcpy(v, t, sizeof t);
        }
}

/* rows `s` of k and v [s, kv_heads * d] into the cache [kv_heads, capacity, d] at start.., rounded
 * to halves by specd_halves, as the torch ops' passes round what they write */
static void write_cache(const float *k, const float *v, int s, int kv_heads, int d, uint16_t *keys, uint16_t *values,
                        int capacity, int start) {
    for (int r = 0; r < s; r++)
        for (int h = 0; h < kv_heads; h++) {
            size_t at = ((size_t)h * capacity + start + r) * d, from = ((size_t)r * kv_heads + h) * d;
            specd_halves(k + from, d, keys + at);
            specd_halves(v + from, d, values + at);
        }
}

static void add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] + y[i];
}

/* gate = silu(gate) * up, SiLU as x / (1 + e^-x) */
static void silu_times(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* floats of work a layer of `L`'s shape needs for s rows */
size_t specd_layer_work(const layer *L, int s) {
    size_t qd = (size_t)L->heads * L->d, kvd = (size_t)L->kv_heads * L->d;
    return (size_t)s * (2 * (size_t)L->hidden + 2 * qd + 2 * kvd + 2 * (size_t)L->inter);
}

/* bytes of scratch for the quantized activations */
size_t specd_layer_scratch(const layer *L, int s) {
    int widest = L->inter > L->hidden ? L->inter : L->hidden;
    widest = widest > L->heads * L->d ? widest : L->heads * L->d;
    return matmul_scratch(widest, s);
}

/* x [s, hidden] (rows at positions start..) through the layer, in place; keys and values the
 * layer's static cache [kv_heads, capacity, d] of halves, rows start.. written. cos and sin
 * [s, d]. `work` holds specd_layer_work floats, `scratch` specd_layer_scratch bytes. Returns 0, or -1 for a
 * shape it cannot take (nothing written then but what was computed before the refusal). */
int specd_layer(const layer *L, float *x, int s, int start, const float *cos, const float *sin, uint16_t *keys,
                uint16_t *values, int capacity, float *work, uint8_t *scratch) {
    int E = L->hidden, qd = L->heads * L->d, kvd = L->kv_heads * L->d;
    if (s <= 0 || start < 0 || start + s > capacity || L->d % 2 != 0) return -1;
    float *h = work, *q = h + (size_t)s * E, *k = q + (size_t)s * qd, *v = k + (size_t)s * kvd;
    float *att = v + (size_t)s * kvd, *out = att + (size_t)s * qd, *gate = out + (size_t)s * E;
    float *up = gate + (size_t)s * L->inter;

    double mark = timing ? now() : 0.0;
    norms(x, L->norm1, s, E, L->eps, h);
    charge(NORMS_ROTARY, &mark);
    linear qkv[3] = {L->q, L->k, L->v};
    float *qkv_out[3] = {q, k, v};
    if (matmul_many(qkv, 3, E, h, s, qkv_out, scratch) != 0) return -1;
    charge(MATMULS, &mark);
    rotary(q, s, L->heads, L->d, cos, sin);
    rotary(k, s, L->kv_heads, L->d, cos, sin);
    charge(NORMS_ROTARY, &mark);
    write_cache(k, v, s, L->kv_heads, L->d, keys, values, capacity, start);
    charge(CACHE_WRITES, &mark);
    if (specd_attend(q, s, L->heads, L->kv_heads, L->d, keys, values, capacity, start, L->scale, att) != 0) return -1;
    charge(ATTENTION, &mark);
    if (matmul_many(&L->o, 1, qd, att, s, &out, scratch) != 0) return -1;
    charge(MATMULS, &mark);
    add(x, out, (size_t)s * E);
    charge(OTHER, &mark);

    norms(x, L->norm2, s, E, L->eps, h);
    charge(NORMS_ROTARY, &mark);
    linear mlp[2] = {L->gate, L->up};
    float *mlp_out[2] = {gate, up};
    if (matmul_many(mlp, 2, E, h, s, mlp_out, scratch) != 0) return -1;
    charge(MATMULS, &mark);
    silu_times(gate, up, (size_t)s * L->inter);
    charge(OTHER, &mark);
    if (matmul_many(&L->down, 1, L->inter, gate, s, &out, scratch) != 0) return -1;
    charge(MATMULS, &mark);
    add(x, out, (size_t)s * E);
    charge(OTHER, &mark);
    return 0;
}
