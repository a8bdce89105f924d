/* What every SIMD body does with its eight lanes per row once a super-block's integers are summed,
 * in dot.c's float order: one fused multiply-add into the float lanes, the activation sums' term
 * apart, and the final reduction (dot.c's `reduce`). Included by the 256-bit and 512-bit kernels
 * after each defines INLINE with its own target attribute, so each compiles it for its
 * instructions; sharing it is what keeps their bits the same.
 */
#ifndef SPECD_LANES8_H
#define SPECD_LANES8_H

#include <immintrin.h>

INLINE float reduce8(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  /* a_i + a_{i+4} */
    __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));                                    /* s0+s2, s1+s3 */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* Q4_K's eight minimums (bytes), each twice as 16 bits: lane l of a madd with the 16 activation
 * sums is minimum l times the sum of its 32 values */
INLINE __m256i q4k_min_pairs(const uint8_t m[8]) {
    __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m));
    return _mm256_setr_m128i(_mm_unpacklo_epi16(m16, m16), _mm_unpackhi_epi16(m16, m16));
}

/* a Q4_K super-block's end for one row: its integer lanes times d, its minimums' term times dmin */
INLINE void q4k_end(__m256i lanes, __m256i min_pairs, float d, float dmin, const act_k *xr, __m256 *acc,
                    __m256 *mins) {
    __m256i summ = _mm256_madd_epi16(min_pairs, _mm256_loadu_si256((const __m256i *)xr->sums));
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(d * xr->d), _mm256_cvtepi32_ps(lanes), *acc);
    *mins = _mm256_fmadd_ps(_mm256_set1_ps(dmin * xr->d), _mm256_cvtepi32_ps(summ), *mins);
}

/* a Q6_K super-block's end for one row: its integer lanes, and the offset of 32 (each 16-weight
 * scale `sc16` times its activations' sum, times 32), both times d */
INLINE void q6k_end(__m256i lanes, __m256i sc16, float d, const act_k *xr, __m256 *acc, __m256 *offsets) {
    __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)xr->sums)), 5);
    __m256 scale = _mm256_set1_ps(d * xr->d);
    *acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(lanes), *acc);
    *offsets = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(offset), *offsets);
}

#endif
