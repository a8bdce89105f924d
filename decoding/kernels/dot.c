/* The portable kernels: the specification the AVX2 ones (dot_avx2.c) compute bit for bit.
 *
 * Each dot product keeps eight float accumulators. Lane l takes elements 4l..4l+3 of each run of
 * 32 (the lanes of an AVX2 register after maddubs and madd); within a block (a super-block of 256,
 * or 32 for Q8_0) the lanes sum in integers, which is exact in any order, and each block adds its
 * lanes to the float ones with one fused multiply-add. Terms that need a block's activation sums
 * (Q4_K's minimums, Q6_K's offset of 32) go to eight lanes of their own, lane l taking the terms
 * of 32 values l (values 2l and 2l+1 of 16 for Q6_K); both sets of lanes are reduced in one fixed
 * tree and the second subtracted. The AVX2 versions do the same float operations in the same
 * order: the same bits.
 */
#include <math.h>
#include <string.h>

#include "blocks.h"

float fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) { mant <<= 1; exp--; }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float reduce(const float a[8]) {
    float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
    return (s0 + s2) + (s1 + s3);
}

/* lane[l] += sum of w[i] * q[i] for i in 4l..4l+3: a block of 32's share of each AVX2 lane */
static void block_lanes(int32_t lane[8], const int32_t w[32], const int8_t q[32]) {
    for (int i = 0; i < 32; i++) lane[i / 4] += w[i] * q[i];
}

static void lanes_fma(float lanes[8], float scale, const int32_t lane[8]) {
    for (int l = 0; l < 8; l++) lanes[l] = fmaf(scale, (float)lane[l], lanes[l]);
}

/* Per super-block: the integer sums (the six-bit scales applied as integers) in eight lanes, one
 * fused multiply-add of them into the float lanes, and the minimums' term apart. */
float dot_q4k(const block_q4k *w, const act_k *x, int k) {
    float lanes[8] = {0}, mins[8] = {0};
    int32_t q[32];
    for (int b = 0; b < k / QK; b++, w++, x++) {
        int32_t lane[8] = {0}, summ[8];
        ahead(w, sizeof *w);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            q4k_scale_min(w->scales, j, &sc, &m);
            const uint8_t *qs = w->qs + 32 * (j / 2);
            for (int i = 0; i < 32; i++) q[i] = sc * ((j & 1) ? qs[i] >> 4 : qs[i] & 15);
            block_lanes(lane, q, x->q + 32 * j);
            summ[j] = m * x->sums[2 * j] + m * x->sums[2 * j + 1];
        }
        lanes_fma(lanes, fp16_to_float(w->d) * x->d, lane);
        lanes_fma(mins, fp16_to_float(w->dmin) * x->d, summ);
    }
    return reduce(lanes) - reduce(mins);
}

/* the 32 six-bit weights (0..63) of chunk j (0..7) of a Q6_K super-block */
static void q6k_chunk(const block_q6k *w, int j, int32_t q[32]) {
    int half = j / 4, quarter = j % 4;
    const uint8_t *ql = w->ql + 64 * half + 32 * (quarter & 1), *qh = w->qh + 32 * half;
    for (int i = 0; i < 32; i++) {
        int low = quarter < 2 ? ql[i] & 15 : ql[i] >> 4;
        q[i] = low | (((qh[i] >> (2 * quarter)) & 3) << 4);
    }
}

float dot_q6k(const block_q6k *w, const act_k *x, int k) {
    float lanes[8] = {0}, offsets[8] = {0};
    int32_t q[32];
    for (int b = 0; b < k / QK; b++, w++, x++) {
        int32_t lane[8] = {0}, offset[8];
        ahead(w, sizeof *w);
        for (int j = 0; j < 8; j++) {
            q6k_chunk(w, j, q);
            for (int i = 0; i < 32; i++) q[i] *= w->scales[2 * j + i / 16];
            block_lanes(lane, q, x->q + 32 * j);
            offset[j] = 32 * (w->scales[2 * j] * x->sums[2 * j] + w->scales[2 * j + 1] * x->sums[2 * j + 1]);
        }
        float scale = fp16_to_float(w->d) * x->d;
        lanes_fma(lanes, scale, lane);
        lanes_fma(offsets, scale, offset);
    }
    return reduce(lanes) - reduce(offsets);
}

float dot_q80(const block_q80 *w, const act_32 *x, int k) {
    float lanes[8] = {0};
    int32_t q[32];
    for (int b = 0; b < k / QB; b++, w++, x++) {
        int32_t lane[8] = {0};
        ahead(w, sizeof *w);
        for (int i = 0; i < 32; i++) q[i] = w->qs[i];
        block_lanes(lane, q, x->q);
        lanes_fma(lanes, fp16_to_float(w->d) * x->d, lane);
    }
    return reduce(lanes);
}

/* x ~= d * q over `n` values, d = max |x| / 127, q rounded to nearest (ties to even) */
static float quantize_block(const float *x, int8_t *q, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < n; i++) {
        int v = (int)nearbyintf(x[i] * id);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return d;
}

void quantize_k(const float *x, act_k *out, int k) {
    for (int b = 0; b < k / QK; b++, x += QK, out++) {
        out->d = quantize_block(x, out->q, QK);
        for (int i = 0; i < 16; i++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += out->q[16 * i + j];
            out->sums[i] = (int16_t)s;
        }
    }
}

void quantize_32(const float *x, act_32 *out, int k) {
    for (int b = 0; b < k / QB; b++, x += QB, out++) out->d = quantize_block(x, out->q, QB);
}
