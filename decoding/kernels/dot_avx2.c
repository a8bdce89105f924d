/* The AVX2 kernels: dot.c's computation, eight lanes at a time, with the same float operations in
 * the same order (so the same bits).
 *
 * Compiled for any x86-64 (the functions carry their own target attribute) and chosen at run time
 * only where the CPU has AVX2, FMA and F16C, so the library runs on every x86-64 machine and
 * nothing is built for the machine that built it (code built with -march=native crashed where
 * the build machine had instructions the VM hid).
 */
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#include <string.h>

#include "blocks.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE AVX2 static inline __attribute__((always_inline))

#include "reduce8.h"

AVX2 static inline float half(uint16_t h) {
    return _cvtsh_ss(h);
}

/* eight lanes, each the sum of four products of unsigned `w` bytes with signed `q` bytes, each
 * pair of products scaled by the 16-bit `scale` of its half */
AVX2 static inline __m256i lanes(__m256i w, __m256i q, __m256i scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, q), scale);
}

/* One weight row against `rows` (1..ROWS) activation rows `x_stride` blocks apart: each run of 32
 * weights is decoded once and meets every row while in registers; each row's integer sums are
 * exact in any order, and its float operations run as for that row alone. */

/* `rows` is a constant in each caller below, so every row's accumulators stay in registers */
INLINE void q4k_rows(const block_q4k *w, const act_k *x, int x_stride, const int rows, int k, float *out) {
    __m256 acc[ROWS], mins[ROWS];
    for (int r = 0; r < rows; r++) acc[r] = mins[r] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int b = 0; b < k / QK; b++, w++, x++) {
        uint8_t sc[8], m[8];
        ahead(w, sizeof *w);
        q4k_unpack(w->scales, sc, m);
        __m256i sum[ROWS];
        for (int r = 0; r < rows; r++) sum[r] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
            __m256i lo = _mm256_and_si256(qs, low4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
            __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
            for (int r = 0; r < rows; r++) {
                const int8_t *xq = x[(size_t)r * x_stride].q + 64 * c;
                __m256i p = _mm256_add_epi32(lanes(lo, _mm256_loadu_si256((const __m256i *)xq), s0),
                                             lanes(hi, _mm256_loadu_si256((const __m256i *)(xq + 32)), s1));
                sum[r] = _mm256_add_epi32(sum[r], p);
            }
        }
        __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m));
        __m256i m_pairs = _mm256_setr_m128i(_mm_unpacklo_epi16(m16, m16), _mm_unpackhi_epi16(m16, m16));
        float d = half(w->d), dmin = half(w->dmin);
        for (int r = 0; r < rows; r++) {
            const act_k *xr = x + (size_t)r * x_stride;
            __m256i summ = _mm256_madd_epi16(m_pairs, _mm256_loadu_si256((const __m256i *)xr->sums));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xr->d), _mm256_cvtepi32_ps(sum[r]), acc[r]);
            mins[r] = _mm256_fmadd_ps(_mm256_set1_ps(dmin * xr->d), _mm256_cvtepi32_ps(summ), mins[r]);
        }
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(mins[r]);
}

INLINE void q6k_rows(const block_q6k *w, const act_k *x, int x_stride, const int rows, int k, float *out) {
    __m256 acc[ROWS], offsets[ROWS];
    for (int r = 0; r < rows; r++) acc[r] = offsets[r] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
    for (int b = 0; b < k / QK; b++, w++, x++) {
        __m256i sum[ROWS];
        ahead(w, sizeof *w);
        for (int r = 0; r < rows; r++) sum[r] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, two), 4)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4)),
            };
            for (int quarter = 0; quarter < 4; quarter++) {
                int j = 4 * h + quarter;
                __m256i scale = _mm256_setr_m128i(_mm_set1_epi16(w->scales[2 * j]), _mm_set1_epi16(w->scales[2 * j + 1]));
                for (int r = 0; r < rows; r++)
                    sum[r] = _mm256_add_epi32(sum[r], lanes(q[quarter], _mm256_loadu_si256((const __m256i *)(x[(size_t)r * x_stride].q + 32 * j)), scale));
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        float d = half(w->d);
        for (int r = 0; r < rows; r++) {
            const act_k *xr = x + (size_t)r * x_stride;
            __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)xr->sums)), 5);
            __m256 scale = _mm256_set1_ps(d * xr->d);
            acc[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum[r]), acc[r]);
            offsets[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(offset), offsets[r]);
        }
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(offsets[r]);
}

AVX2 void dot_q4k_avx2(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    case 1: q4k_rows(w, x, x_stride, 1, k, out); break;
    case 2: q4k_rows(w, x, x_stride, 2, k, out); break;
    case 3: q4k_rows(w, x, x_stride, 3, k, out); break;
    default: q4k_rows(w, x, x_stride, 4, k, out); break;
    }
}

AVX2 void dot_q6k_avx2(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    case 1: q6k_rows(w, x, x_stride, 1, k, out); break;
    case 2: q6k_rows(w, x, x_stride, 2, k, out); break;
    case 3: q6k_rows(w, x, x_stride, 3, k, out); break;
    default: q6k_rows(w, x, x_stride, 4, k, out); break;
    }
}

AVX2 float dot_q80_avx2(const block_q80 *w, const act_32 *x, int k) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b = 0; b < k / QB; b++, w++, x++) {
        ahead(w, sizeof *w);
        __m256i wq = _mm256_loadu_si256((const __m256i *)w->qs);
        __m256i xq = _mm256_loadu_si256((const __m256i *)x->q);
        __m256i sum = lanes(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq), ones);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(w->d) * x->d), _mm256_cvtepi32_ps(sum), acc);
    }
    return reduce8(acc);
}

/* dot.c's quantize_block: d = max |x| / 127, q = x / d rounded to nearest, ties to even */
AVX2 static float quantize_block(const float *x, int8_t *q, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float d = _mm_cvtss_f32(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 scale = _mm256_set1_ps(id);
    for (int i = 0; i < n; i += 32) {
        __m256i v[4];
        for (int j = 0; j < 4; j++) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), scale),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            v[j] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)),
                                    _mm256_set1_epi32(-127));
        }
        /* pack to bytes; packs works within 128-bit halves, so put the order back */
        __m256i w16 = _mm256_packs_epi32(v[0], v[1]), x16 = _mm256_packs_epi32(v[2], v[3]);
        __m256i b = _mm256_packs_epi16(w16, x16);
        b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + i), b);
    }
    return d;
}

AVX2 void quantize_k_avx2(const float *x, act_k *out, int k) {
    for (int b = 0; b < k / QK; b++, x += QK, out++) {
        out->d = quantize_block(x, out->q, QK);
        for (int i = 0; i < 16; i++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(out->q + 16 * i));
            __m256i w = _mm256_cvtepi8_epi16(q);
            __m128i s = _mm_add_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0x4e));
            s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0xb1));
            s = _mm_add_epi16(s, _mm_shufflelo_epi16(s, 0xb1));
            out->sums[i] = (int16_t)_mm_extract_epi16(s, 0);
        }
    }
}

AVX2 void quantize_32_avx2(const float *x, act_32 *out, int k) {
    for (int b = 0; b < k / QB; b++, x += QB, out++) out->d = quantize_block(x, out->q, QB);
}
#endif
