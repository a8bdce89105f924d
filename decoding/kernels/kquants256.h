/* The 256-bit K-quant kernels, included once per instruction set by a file that defines first:
 * TARGET (the functions' target attribute), INLINE (the same, always inlined), KQ(name) (the name
 * with that set's suffix) and ADD_LANES(sum, w, q, scale): `sum` plus eight lanes, each the four
 * products of unsigned `w` bytes with signed `q` bytes, each pair of them times the 16-bit
 * `scale` of its half. AVX2 takes two instructions and an add for that (dot_avx2.c); AVX-VNNI one
 * fewer (dot_avxvnni.c). The integer sums are exact either way, so both give dot.c's bits.
 */

/* A body may lay out each 64 values of a super-block (two runs of 32, a and b) otherwise, the
 * same way for weights and activations, so that it multiplies less. PAIR(a, b) turns a chunk's two
 * weight vectors into that layout; ADD_PAIR(sum, wa, xa, wb, xb, sa, sb) adds to `sum` what
 * ADD_LANES of (a, sa) and then of (b, sb) would, from the laid-out weights and activations. By
 * default the layout is GGUF's own and ADD_PAIR is those two ADD_LANES. */
#ifndef PAIR
#define PAIR(a, b) ((void)0)
#define ADD_PAIR(sum, wa, xa, wb, xb, sa, sb) ADD_LANES(ADD_LANES(sum, wa, xa, sa), wb, xb, sb)
#endif

/* One weight row against `rows` (1..ROWS) activation rows `x_stride` blocks apart: each run of 32
 * weights is decoded once and meets every row while in registers; each row's integer sums are
 * exact in any order, and its float operations run as for that row alone. */

/* `rows` is a constant in each caller below, and the caller's arrays are of exactly that size, so
 * the compiler keeps the accumulators in registers as far as they go (dot_avx512.c says why) */
INLINE void KQ(q4k_rows)(const block_q4k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                         __m256 *acc, __m256 *mins, __m256i *sum) {
    for (int r = 0; r < rows; r++) acc[r] = mins[r] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int b = 0; b < k / QK; b++, w++, x++) {
        uint8_t sc[8], m[8];
        ahead(w, sizeof *w);
        q4k_unpack(w->scales, sc, m);
        for (int r = 0; r < rows; r++) sum[r] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
            __m256i lo = _mm256_and_si256(qs, low4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
            __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
            PAIR(lo, hi);
            for (int r = 0; r < rows; r++) {
                const int8_t *xq = x[(size_t)r * x_stride].q + 64 * c;
                sum[r] = ADD_PAIR(sum[r], lo, _mm256_loadu_si256((const __m256i *)xq), hi,
                                  _mm256_loadu_si256((const __m256i *)(xq + 32)), s0, s1);
            }
        }
        __m256i min_pairs = q4k_min_pairs(m);
        float d = _cvtsh_ss(w->d), dmin = _cvtsh_ss(w->dmin);
        for (int r = 0; r < rows; r++)
            q4k_end(sum[r], min_pairs, d, dmin, x + (size_t)r * x_stride, &acc[r], &mins[r]);
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(mins[r]);
}

INLINE void KQ(q6k_rows)(const block_q6k *w, const act_k *x, int x_stride, const int rows, int k, float *out,
                         __m256 *acc, __m256 *offsets, __m256i *sum) {
    for (int r = 0; r < rows; r++) acc[r] = offsets[r] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
    for (int b = 0; b < k / QK; b++, w++, x++) {
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
            for (int quarter = 0; quarter < 4; quarter += 2) {
                int j = 4 * h + quarter;
                __m256i sa = _mm256_setr_m128i(_mm_set1_epi16(w->scales[2 * j]), _mm_set1_epi16(w->scales[2 * j + 1]));
                __m256i sb = _mm256_setr_m128i(_mm_set1_epi16(w->scales[2 * j + 2]), _mm_set1_epi16(w->scales[2 * j + 3]));
                PAIR(q[quarter], q[quarter + 1]);
                for (int r = 0; r < rows; r++) {
                    const int8_t *xq = x[(size_t)r * x_stride].q + 32 * j;
                    sum[r] = ADD_PAIR(sum[r], q[quarter], _mm256_loadu_si256((const __m256i *)xq), q[quarter + 1],
                                      _mm256_loadu_si256((const __m256i *)(xq + 32)), sa, sb);
                }
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        float d = _cvtsh_ss(w->d);
        for (int r = 0; r < rows; r++) q6k_end(sum[r], sc16, d, x + (size_t)r * x_stride, &acc[r], &offsets[r]);
    }
    for (int r = 0; r < rows; r++) out[r] = reduce8(acc[r]) - reduce8(offsets[r]);
}

/* the integer sums of 8 rows fill 8 of AVX2's 16 registers; their float lanes, touched once a
 * super-block, are the ones that spill */
#define ARRAYS(n) __m256 a[n], b[n]; __m256i s[n]
#define Q4K(n) case n: { ARRAYS(n); KQ(q4k_rows)(w, x, x_stride, n, k, out, a, b, s); break; }
#define Q6K(n) case n: { ARRAYS(n); KQ(q6k_rows)(w, x, x_stride, n, k, out, a, b, s); break; }

TARGET void KQ(dot_q4k)(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    Q4K(1) Q4K(2) Q4K(3) Q4K(4) Q4K(5) Q4K(6) Q4K(7)
    default: { ARRAYS(8); KQ(q4k_rows)(w, x, x_stride, 8, k, out, a, b, s); }
    }
}

TARGET void KQ(dot_q6k)(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out) {
    switch (rows) {
    Q6K(1) Q6K(2) Q6K(3) Q6K(4) Q6K(5) Q6K(6) Q6K(7)
    default: { ARRAYS(8); KQ(q6k_rows)(w, x, x_stride, 8, k, out, a, b, s); }
    }
}

#undef ARRAYS
#undef Q4K
#undef Q6K
