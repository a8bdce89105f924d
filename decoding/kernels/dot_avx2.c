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
#undef KQ
#undef ADD_PAIR

/* Zen 1 (the first EPYCs) splits each 256-bit op in two and multiplies integers on one pipe only:
 * there the K-quant kernels are bound by their two multiplies per 32 weights (vpmaddubsw, then
 * vpmaddwd by the run's scale), and each activation row costs as much as the first. So a second body
 * reads each 64 values (runs a and b) as two vectors whose 32-bit lane i holds a[4i], a[4i+1],
 * b[4i], b[4i+1] and then a[4i+2], a[4i+3], b[4i+2], b[4i+3]: the 16-bit pairs of the two vpmaddubsw
 * add up lane by lane to a's four products and b's four (at most 2 x 2 x 63 x 127 = 32004, so Q6_K's
 * six-bit weights fit too), and one vpmaddwd by (sa, sb) gives lane i the integer that dot.c's
 * lane i gets from two. The same integers, so the same bits.
 *
 * The weights are stored so when the model is loaded (layout.c; relayout_q4k_avx2 below does it
 * at memory speed), the activations when quantized (quantize_k_avx2_paired): laying out the weights
 * in every call instead cost four instructions per 64 weights, a loss at one row (22% on Zen 1). */
INLINE void pair_lanes(__m256i *a, __m256i *b) {
    __m256i first = _mm256_blend_epi16(*a, _mm256_slli_epi32(*b, 16), 0xaa);
    *b = _mm256_blend_epi16(_mm256_srli_epi32(*a, 16), *b, 0xaa);
    *a = first;
}

INLINE __m256i add_pair(__m256i sum, __m256i wa, __m256i xa, __m256i wb, __m256i xb, __m256i s) {
    __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(wa, xa), _mm256_maddubs_epi16(wb, xb));
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, s));
}

#define KQ(name) name##_avx2_paired
#define ADD_PAIR(sum, wa, xa, wb, xb, s) add_pair(sum, wa, xa, wb, xb, s)
#include "kquants256.h"

/* layout.c's q4k_relayout and q6k_relayout into the paired layout, 32 bytes at a time */
AVX2 void relayout_q4k_avx2(block_q4k *w, size_t count) {
    const __m256i low4 = _mm256_set1_epi8(15);
    for (size_t b = 0; b < count; b++)
        for (int c = 0; c < 4; c++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(qs, low4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
            pair_lanes(&lo, &hi);
            _mm256_storeu_si256((__m256i *)(w[b].qs + 32 * c), _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
        }
}

AVX2 void relayout_q6k_avx2(block_q6k *w, size_t count) {
    const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
    for (size_t b = 0; b < count; b++)
        for (int h = 0; h < 2; h++) {
            __m256i *ql0 = (__m256i *)(w[b].ql + 64 * h), *ql1 = ql0 + 1, *qh = (__m256i *)(w[b].qh + 32 * h);
            __m256i l0 = _mm256_loadu_si256(ql0), l1 = _mm256_loadu_si256(ql1), hb = _mm256_loadu_si256(qh);
            __m256i q[4];  /* as kquants256.h's q6k_rows decodes them */
            for (int quarter = 0; quarter < 4; quarter++) {
                __m256i low = _mm256_srli_epi16(quarter & 1 ? l1 : l0, quarter < 2 ? 0 : 4);
                __m256i high = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * quarter), two);
                q[quarter] = _mm256_or_si256(_mm256_and_si256(low, low4), _mm256_slli_epi16(high, 4));
            }
            pair_lanes(&q[0], &q[1]), pair_lanes(&q[2], &q[3]);
            __m256i high = _mm256_setzero_si256();
            for (int quarter = 0; quarter < 4; quarter++)
                high = _mm256_or_si256(high, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[quarter], 4), two), 2 * quarter));
            _mm256_storeu_si256(ql0, _mm256_or_si256(_mm256_and_si256(q[0], low4), _mm256_slli_epi16(_mm256_and_si256(q[2], low4), 4)));
            _mm256_storeu_si256(ql1, _mm256_or_si256(_mm256_and_si256(q[1], low4), _mm256_slli_epi16(_mm256_and_si256(q[3], low4), 4)));
            _mm256_storeu_si256(qh, high);
        }
}

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

/* quantize_k_avx2's blocks with each 64 values laid out as the paired kernels read them */
AVX2 void quantize_k_avx2_paired(const float *x, act_k *out, int k) {
    quantize_k_avx2(x, out, k);
    for (int b = 0; b < k / QK; b++)
        for (int c = 0; c < QK; c += 64) {
            __m256i lo = _mm256_loadu_si256((const __m256i *)(out[b].q + c));
            __m256i hi = _mm256_loadu_si256((const __m256i *)(out[b].q + c + 32));
            pair_lanes(&lo, &hi);
            _mm256_storeu_si256((__m256i *)(out[b].q + c), lo);
            _mm256_storeu_si256((__m256i *)(out[b].q + c + 32), hi);
        }
}

AVX2 void quantize_32_avx2(const float *x, act_32 *out, int k) {
    for (int b = 0; b < k / QB; b++, x += QB, out++) out->d = quantize_block(x, out->q, QB);
}
#endif
