/* The 256-bit K-quant kernels, included once per instruction set by a file that defines first:
 * TARGET (the functions' target attribute), INLINE (the same, always inlined), KQ(name) (the name
 * with that set's suffix) and ADD_LANES(sum, w, q, scale): `sum` plus eight lanes, each the four
 * products of unsigned `w` bytes with signed `q` bytes, each pair of them times the 16-bit
 * `scale` of its half. AVX2 takes two instructions and an add for that (dot_avx2.c); AVX-VNNI one
 * fewer (dot_avxvnni.c). The integer sums are exact either way, so both give dot.c's bits.
 */

/* A body may read each 64 values of a super-block (two runs of 32, a and b) in another layout, the
 * same for weights and activations (dot_avx2.c's paired one), so that it multiplies less:
 * ADD_PAIR(sum, wa, xa, wb, xb, s) adds to `sum` what ADD_LANES of (a, a's scale) and then of (b,
 * b's scale) would in the file's layout, `s` holding in each 32-bit lane a's scale in the low 16
 * bits and b's in the high (Q6_K: a's and b's scale of the lane's half). By default the layout is
 * GGUF's own and ADD_PAIR is those two ADD_LANES. */
#ifndef ADD_PAIR
#define ADD_PAIR(sum, wa, xa, wb, xb, s) \
    ADD_LANES(ADD_LANES(sum, wa, xa, low_words(s)), wb, xb, high_words(s))
#endif

#ifndef SPECD_KQUANTS256_HELPERS  /* a file may include this twice, with two ADD_PAIRs */
#define SPECD_KQUANTS256_HELPERS

/* each 32-bit lane's low (high) 16 bits in both halves of the lane */
INLINE __m256i low_words(__m256i s) {
    return _mm256_shuffle_epi8(s, _mm256_set1_epi32(0x01000100));
}

INLINE __m256i high_words(__m256i s) {
    return _mm256_shuffle_epi8(s, _mm256_set1_epi32(0x03020302));
}

/* The scales as ADD_PAIR takes them, one vector per 64 weights, made once per super-block with a
 * few shuffles: byte by byte through general registers (vpextrb, vmovd, vpbroadcastw per scale)
 * they kept the one vector pipe that does them busy longer than the multiplies (llvm-mca, znver1). */
INLINE void q4k_scale_pairs(const uint8_t sc[8], __m256i out[4]) {
    __m256i words = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    out[0] = _mm256_shuffle_epi32(words, 0x00), out[1] = _mm256_shuffle_epi32(words, 0x55);
    out[2] = _mm256_shuffle_epi32(words, 0xaa), out[3] = _mm256_shuffle_epi32(words, 0xff);
}

/* Q6_K's 16 scales, one per 16 weights: the 64 weights j (0..3) are runs 2j (a) and 2j + 1 (b),
 * scales 4j, 4j + 1 (a's halves) and 4j + 2, 4j + 3 (b's); the low half of a vector takes the
 * first 16 weights of each run, the high half the second */
INLINE void q6k_scale_pairs(const int8_t scales[16], __m256i out[4]) {
    __m128i order = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i words = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)scales), order));
    out[0] = _mm256_shuffle_epi32(words, 0x00), out[1] = _mm256_shuffle_epi32(words, 0x55);
    out[2] = _mm256_shuffle_epi32(words, 0xaa), out[3] = _mm256_shuffle_epi32(words, 0xff);
}
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
        __m256i scale[4];
        ahead(w, sizeof *w);
        q4k_unpack(w->scales, sc, m);
        q4k_scale_pairs(sc, scale);
        for (int r = 0; r < rows; r++) sum[r] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
            __m256i lo = _mm256_and_si256(qs, low4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
            for (int r = 0; r < rows; r++) {
                const int8_t *xq = x[(size_t)r * x_stride].q + 64 * c;
                sum[r] = ADD_PAIR(sum[r], lo, _mm256_loadu_si256((const __m256i *)xq), hi,
                                  _mm256_loadu_si256((const __m256i *)(xq + 32)), scale[c]);
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
        __m256i scale[4];
        ahead(w, sizeof *w);
        q6k_scale_pairs(w->scales, scale);
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
                int j = 2 * h + quarter / 2;  /* which 64 of the super-block */
                for (int r = 0; r < rows; r++) {
                    const int8_t *xq = x[(size_t)r * x_stride].q + 64 * j;
                    sum[r] = ADD_PAIR(sum[r], q[quarter], _mm256_loadu_si256((const __m256i *)xq), q[quarter + 1],
                                      _mm256_loadu_si256((const __m256i *)(xq + 32)), scale[j]);
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
