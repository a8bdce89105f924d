/* The AVX-512 kernels (AVX512BW and VNNI, as on Ice Lake and later Intel, Zen 4 and later AMD):
 * the K-quant products of dot_avx2.c with two runs of 32 weights in each register, and each
 * product and scale summed by one VNNI instruction where AVX2 takes two; so each activation row
 * costs about half the instructions, which is what bounds a pass over more than one row.
 *
 * The same bits as the portable code: inside a super-block the integer sums are exact in any
 * order, and at its end the two halves of each register are added (integers still), giving the
 * AVX2 code's eight lanes, which then take the AVX2 code's float operations in its order: two rows
 * at a time, one in each half of a register (q4k_end2, q6k_end2), which is each half's own order.
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

/* Two rows' ends in one 512-bit register, row r in the low half and r + 1 in the high: each half
 * takes q4k_end's (q6k_end's) lane operations for its row, so the bits are the same, in about half
 * the instructions: a pass of several rows spent a quarter of its time in the ends. */

/* [fold(a) | fold(b)] */
INLINE __m512i fold2(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* [a x8 | b x8] */
INLINE __m512 halves(float a, float b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)),
                                               _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

/* both rows' 16 activation sums of the super-block, one row per half */
INLINE __m512i sums2(const act_k *xr, const act_k *xs) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)xr->sums)),
                              _mm256_loadu_si256((const __m256i *)xs->sums), 1);
}

INLINE __m256 low8(__m512 a) { return _mm512_castps512_ps256(a); }
INLINE __m256 high8(__m512 a) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)); }

/* q4k_end for rows r (xr) and r + 1 (xs), whose integer sums are sr and ss */
INLINE void q4k_end2(__m512i sr, __m512i ss, __m512i min_pairs2, float d, float dmin, const act_k *xr,
                     const act_k *xs, __m512 *acc, __m512 *mins) {
    __m512i summ = _mm512_madd_epi16(min_pairs2, sums2(xr, xs));
    __m512 xd = halves(xr->d, xs->d);
    *acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(d), xd), _mm512_cvtepi32_ps(fold2(sr, ss)), *acc);
    *mins = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dmin), xd), _mm512_cvtepi32_ps(summ), *mins);
}

/* q6k_end for rows r (xr) and r + 1 (xs) */
INLINE void q6k_end2(__m512i sr, __m512i ss, __m512i sc16x2, float d, const act_k *xr, const act_k *xs,
                     __m512 *acc, __m512 *offsets) {
    __m512i offset = _mm512_slli_epi32(_mm512_madd_epi16(sc16x2, sums2(xr, xs)), 5);
    __m512 scale = _mm512_mul_ps(_mm512_set1_ps(d), halves(xr->d, xs->d));
    *acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(fold2(sr, ss)), *acc);
    *offsets = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(offset), *offsets);
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

/* each row's float lanes reduced, its minimums' (offsets') lanes taken off: rows 2p and 2p + 1
 * from the halves of acc[p], an odd last row from the low half of acc[rows / 2] */
INLINE void ends(const __m512 *acc, const __m512 *mins, int rows, float *out) {
    for (int p = 0; p < rows / 2; p++) {
        out[2 * p] = reduce8(low8(acc[p])) - reduce8(low8(mins[p]));
        out[2 * p + 1] = reduce8(high8(acc[p])) - reduce8(high8(mins[p]));
    }
    if (rows & 1) out[rows - 1] = reduce8(low8(acc[rows / 2])) - reduce8(low8(mins[rows / 2]));
}

/* Chunk c's 32 bytes hold sub-block 2c in their low nibbles and 2c+1 in their high ones, and the
 * activations of 2c and 2c+1 are 64 bytes in a row: so one register holds both sub-blocks, the
 * low half shifted by 0 and the high by 4, and meets 64 activation bytes at once. */
INLINE void q4k_rows(const block_q4k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                     __m512 *acc, __m512 *mins, __m512i *sum) {
    const int pairs = rows / 2;   /* rows 2p and 2p + 1 end in acc[p]; an odd last row alone in acc[pairs] */
    for (int p = 0; p < (rows + 1) / 2; p++) acc[p] = mins[p] = _mm512_setzero_ps();
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
        __m512i min_pairs2 = _mm512_broadcast_i64x4(min_pairs);
        for (int p = 0; p < pairs; p++)
            q4k_end2(sum[2 * p], sum[2 * p + 1], min_pairs2, d, dmin, x + (size_t)2 * p * x_stride,
                     x + (size_t)(2 * p + 1) * x_stride, &acc[p], &mins[p]);
        if (rows & 1) {
            __m256 a = low8(acc[pairs]), mn = low8(mins[pairs]);
            q4k_end(fold(sum[rows - 1]), min_pairs, d, dmin, x + (size_t)(rows - 1) * x_stride, &a, &mn);
            acc[pairs] = _mm512_castps256_ps512(a), mins[pairs] = _mm512_castps256_ps512(mn);
        }
    }
    ends(acc, mins, rows, out);
}

/* Half h of a Q6_K super-block: runs 4h..4h+3 of 32 weights, whose low four bits are the low
 * (runs 4h, 4h+1) and high (4h+2, 4h+3) nibbles of ql's 64 bytes there, and whose top two bits are
 * qh's 32 bytes shifted by 0, 2, 4, 6. Two runs per register, against 64 activation bytes. */
INLINE void q6k_rows(const block_q6k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                     __m512 *acc, __m512 *offsets, __m512i *sum) {
    const int pairs = rows / 2;   /* as q4k_rows */
    for (int p = 0; p < (rows + 1) / 2; p++) acc[p] = offsets[p] = _mm512_setzero_ps();
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
        __m512i sc16x2 = _mm512_broadcast_i64x4(sc16);
        for (int p = 0; p < pairs; p++)
            q6k_end2(sum[2 * p], sum[2 * p + 1], sc16x2, d, x + (size_t)2 * p * x_stride,
                     x + (size_t)(2 * p + 1) * x_stride, &acc[p], &offsets[p]);
        if (rows & 1) {
            __m256 a = low8(acc[pairs]), o = low8(offsets[pairs]);
            q6k_end(fold(sum[rows - 1]), sc16, d, x + (size_t)(rows - 1) * x_stride, &a, &o);
            acc[pairs] = _mm512_castps256_ps512(a), offsets[pairs] = _mm512_castps256_ps512(o);
        }
    }
    ends(acc, offsets, rows, out);
}

/* Each row count gets its own arrays of exactly that size, so the compiler keeps them all in
 * registers (arrays of the largest size made it spill even for one row: 20% slower there). */
#define ARRAYS(n) __m512 a[(n + 1) / 2], b[(n + 1) / 2]; __m512i s[n]
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
