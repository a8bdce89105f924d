/* The AVX-512 kernels (AVX512BW and VNNI, as on Ice Lake and later Intel, Zen 4 and later AMD):
 * the K-quant products of dot_avx2.c with two runs of 32 weights in each register, and each
 * product and scale summed by one VNNI instruction where AVX2 takes two; so each activation row
 * costs about half the instructions, which is what bounds a pass over more than one row.
 *
 * The same bits as the portable code: inside a super-block the integer sums are exact in any
 * order, and at its end the two halves of each register are added (integers still), giving the
 * AVX2 code's eight lanes, which then take the AVX2 code's float operations in its order.
 * Built, like dot_avx2.c, with per-function target attributes and chosen at run time.
 */
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "blocks.h"

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define INLINE AVX512 static inline __attribute__((always_inline))

#include "lanes8.h"

/* the AVX2 code's eight lanes: the low and high halves of a register of sixteen, added */
INLINE __m256i fold(__m512i a) {
    return _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
}

/* sum + the products of unsigned `w` and signed `q` bytes, each pair of them times its 16-bit scale */
INLINE __m512i lanes(__m512i sum, __m512i w, __m512i q, __m512i scale) {
    return _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(w, q), scale);
}

/* a register of 32 16-bit lanes whose lane i holds byte `index(i)` of `bytes` (as 16 bits) */
INLINE __m512i spread(__m512i words, const uint16_t index[32]) {
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(index), words);
}

static const uint16_t Q4K_SCALE[4][32] = {   /* chunk c: sub-block 2c's scale, then 2c+1's */
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
};

static const uint16_t Q6K_SCALE[4][32] = {   /* pair p of 32-weight runs: 16-weight scales 4p..4p+3 */
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15,
     15, 15, 15, 15},
};

/* Chunk c's 32 bytes hold sub-block 2c in their low nibbles and 2c+1 in their high ones, and the
 * activations of 2c and 2c+1 are 64 bytes in a row: so one register holds both sub-blocks, the
 * low half shifted by 0 and the high by 4, and meets 64 activation bytes at once. */
INLINE void q4k_rows(const block_q4k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                     __m256 *acc, __m256 *mins, __m512i *sum) {
    for (int r = 0; r < rows; r++) acc[r] = mins[r] = _mm256_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(15);
    const __m512i nibble = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    for (int b = 0; b < k / QK; b++, w++, x++) {
        uint8_t sc[8], m[8];
        ahead(w, sizeof *w);
        q4k_unpack(w->scales, sc, m);
        __m512i scales = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *)sc)));
        for (int r = 0; r < rows; r++) sum[r] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m512i qs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qs + 32 * c)));
            __m512i q = _mm512_and_si512(_mm512_srlv_epi16(qs, nibble), low4);
            __m512i scale = spread(scales, Q4K_SCALE[c]);
            for (int r = 0; r < rows; r++)
                sum[r] = lanes(sum[r], q, _mm512_loadu_si512(x[(size_t)r * x_stride].q + 64 * c), scale);
        }
        __m256i min_pairs = q4k_min_pairs(m);
        float d = _cvtsh_ss(w->d), dmin = _cvtsh_ss(w->dmin);
        for (int r = 0; r < rows; r++)
            q4k_end(fold(sum[r]), min_pairs, d, dmin, x + (size_t)r * x_stride, &acc[r], &mins[r]);
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(mins[r]);
}

/* Half h of a Q6_K super-block: runs 4h..4h+3 of 32 weights, whose low four bits are the low
 * (runs 4h, 4h+1) and high (4h+2, 4h+3) nibbles of ql's 64 bytes there, and whose top two bits are
 * qh's 32 bytes shifted by 0, 2, 4, 6. Two runs per register, against 64 activation bytes. */
INLINE void q6k_rows(const block_q6k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                     __m256 *acc, __m256 *offsets, __m512i *sum) {
    for (int r = 0; r < rows; r++) acc[r] = offsets[r] = _mm256_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(15), two = _mm512_set1_epi8(3);
    const __m512i shift01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i shift23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    for (int b = 0; b < k / QK; b++, w++, x++) {
        ahead(w, sizeof *w);
        __m512i scales = _mm512_cvtepi8_epi16(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)w->scales)));
        for (int r = 0; r < rows; r++) sum[r] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
            __m512i q[2] = {
                _mm512_or_si512(_mm512_and_si512(ql, low4),
                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift01), two), 4)),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift23), two), 4)),
            };
            for (int pair = 0; pair < 2; pair++) {
                __m512i scale = spread(scales, Q6K_SCALE[2 * h + pair]);
                for (int r = 0; r < rows; r++)
                    sum[r] = lanes(sum[r], q[pair],
                                   _mm512_loadu_si512(x[(size_t)r * x_stride].q + 128 * h + 64 * pair), scale);
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        float d = _cvtsh_ss(w->d);
        for (int r = 0; r < rows; r++) q6k_end(fold(sum[r]), sc16, d, x + (size_t)r * x_stride, &acc[r], &offsets[r]);
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(offsets[r]);
}

/* Each row count gets its own arrays of exactly that size, so the compiler keeps them all in
 * registers (arrays of the largest size made it spill even for one row: 20% slower there). */
#define ARRAYS(n) __m256 a[n], b[n]; __m512i s[n]
#define Q4K(n) case n: { ARRAYS(n); q4k_rows(w, x, x_stride, n, k, out, a, b, s); break; }
#define Q6K(n) case n: { ARRAYS(n); q6k_rows(w, x, x_stride, n, k, out, a, b, s); break; }

AVX512 void dot_q4k_avx512(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    Q4K(1) Q4K(2) Q4K(3) Q4K(4) Q4K(5) Q4K(6) Q4K(7)
    default: { ARRAYS(8); q4k_rows(w, x, x_stride, 8, k, out, a, b, s); }
    }
}

AVX512 void dot_q6k_avx512(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    Q6K(1) Q6K(2) Q6K(3) Q6K(4) Q6K(5) Q6K(6) Q6K(7)
    default: { ARRAYS(8); q6k_rows(w, x, x_stride, 8, k, out, a, b, s); }
    }
}
#endif
