/* The AVX2 body of attend.c's heads: the same float operations in the same order, eight lanes at a
 * time (the head dimension in the weighted sum, and four keys' dot products side by side), so the
 * same bits; the cache's halves widened by F16C's vcvtph2ps, exact like half.h's. Chosen at run
 * time where the CPU has AVX2 and FMA (and F16C, which every such CPU has), like dot_avx2.c.
 */
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "attend.h"
#include "blocks.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE AVX2 static inline __attribute__((always_inline))

#include "lanes8.h"

/* eight halves from p, widened */
INLINE __m256 load_halves(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* e^x for x <= 0, lane by lane: attend.c's exp_neg */
INLINE __m256 exp_neg8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(EXP_LOW));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
    __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(EXP_P0), r, _mm256_set1_ps(EXP_P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(EXP_P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(EXP_P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(EXP_P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(EXP_P5));
    y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i two = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(two));
}

/* q . k for KEYS_AT_ONCE keys d apart (or one), each attend.c's dot8: several keys' chains of fused
 * adds side by side hide each one's latency */
#define KEYS_AT_ONCE 8
INLINE void dots(const float *q, const uint16_t *k, int d, int count, float *out) {
    __m256 a[KEYS_AT_ONCE];
    for (int l = 0; l < KEYS_AT_ONCE; l++) a[l] = _mm256_setzero_ps();
    if (count == KEYS_AT_ONCE) {
        for (int i = 0; i < d; i += 8) {
            __m256 x = _mm256_loadu_ps(q + i);
            for (int l = 0; l < KEYS_AT_ONCE; l++) a[l] = _mm256_fmadd_ps(x, load_halves(k + (size_t)l * d + i), a[l]);
        }
        for (int l = 0; l < KEYS_AT_ONCE; l++) out[l] = reduce8(a[l]);
        return;
    }
    for (int l = 0; l < count; l++) {
        for (int i = 0; i < d; i += 8) a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_halves(k + (size_t)l * d + i), a[0]);
        out[l] = reduce8(a[0]);
        a[0] = _mm256_setzero_ps();
    }
}

/* acc[i] = acc[i] * c + p[0] v_0[i] + ... + p[n-1] v_{n-1}[i], fused, in order of the keys; eight
 * lanes of acc at a time when it can (eight chains of fused adds hide each one's latency) */
INLINE void weigh(__m256 *acc, const float *p, const uint16_t *v, int d, int n, float c) {
    int i = 0;
    for (; i + 8 <= d / 8; i += 8) {
        __m256 a[8];
        for (int l = 0; l < 8; l++) a[l] = _mm256_mul_ps(acc[i + l], _mm256_set1_ps(c));
        for (int j = 0; j < n; j++) {
            __m256 w = _mm256_set1_ps(p[j]);
            const uint16_t *row = v + (size_t)j * d + 8 * i;
            for (int l = 0; l < 8; l++) a[l] = _mm256_fmadd_ps(w, load_halves(row + 8 * l), a[l]);
        }
        for (int l = 0; l < 8; l++) acc[i + l] = a[l];
    }
    for (; i < d / 8; i++) {
        __m256 a = _mm256_mul_ps(acc[i], _mm256_set1_ps(c));
        for (int j = 0; j < n; j++) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), load_halves(v + (size_t)j * d + 8 * i), a);
        acc[i] = a;
    }
}

/* one head's block of n keys from key b: attend.c's block */
INLINE void block(const float *q, const uint16_t *k, const uint16_t *v, int d, int b, int n, float scale, __m256 *acc,
                  float *top, float *sum) {
    float p[KEYS] = {0}, was = *top;
    for (int j = 0; j < n; j += KEYS_AT_ONCE)
        dots(q, k + (size_t)(b + j) * d, d, n - j < KEYS_AT_ONCE ? n - j : KEYS_AT_ONCE, p + j);
    for (int j = 0; j < n; j++) {
        p[j] *= scale;
        *top = p[j] > *top ? p[j] : *top;
    }
    float c = _mm256_cvtss_f32(exp_neg8(_mm256_set1_ps(was - *top)));
    *sum *= c;
    for (int j = 0; j < n; j += 8)
        _mm256_storeu_ps(p + j, exp_neg8(_mm256_sub_ps(_mm256_loadu_ps(p + j), _mm256_set1_ps(*top))));
    for (int j = 0; j < n; j++) *sum += p[j];
    weigh(acc, p, v + (size_t)b * d, d, n, c);
}

AVX2 void attend_heads_avx2(const float *q, int rows, size_t stride, int count, const uint16_t *k, const uint16_t *v,
                            int d, int last, float scale, float *out) {
    __m256 acc[ROWS_AT_ONCE][HEADS_AT_ONCE][MAX_DIM / 8];  /* 64 KB at most: on the stack */
    float top[ROWS_AT_ONCE][HEADS_AT_ONCE], sum[ROWS_AT_ONCE][HEADS_AT_ONCE];
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < count; h++) {
            for (int i = 0; i < d / 8; i++) acc[r][h][i] = _mm256_setzero_ps();
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
            for (int i = 0; i < d / 8; i++)
                _mm256_storeu_ps(out + r * stride + (size_t)h * d + 8 * i,
                                 _mm256_div_ps(acc[r][h][i], _mm256_set1_ps(sum[r][h])));
}
#endif
