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

#include "blocks.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE AVX2 static inline __attribute__((always_inline))

#include "lanes8.h"

#define TARGET AVX2
#define KQ(name) name##_avx2
#define ADD_LANES(sum, w, q, scale) _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(w, q), scale))
#include "kquants256.h"

AVX2 float dot_q80_avx2(const block_q80 *w, const act_32 *x, int k) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b = 0; b < k / QB; b++, w++, x++) {
        ahead(w, sizeof *w);
        __m256i wq = _mm256_loadu_si256((const __m256i *)w->qs);
        __m256i xq = _mm256_loadu_si256((const __m256i *)x->q);
        __m256i sum = ADD_LANES(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq), ones);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w->d) * x->d), _mm256_cvtepi32_ps(sum), acc);
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
