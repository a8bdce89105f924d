/* The one reduction of eight float lanes that every SIMD body ends with (dot.c's `reduce`, in the
 * same order). Included by dot_avx2.c and dot_avx512.c after each defines INLINE with its own
 * target attribute, so each compiles it for its instructions. */
#ifndef SPECD_REDUCE8_H
#define SPECD_REDUCE8_H

#include <immintrin.h>

INLINE float reduce8(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  /* a_i + a_{i+4} */
    __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));                                    /* s0+s2, s1+s3 */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

#endif
