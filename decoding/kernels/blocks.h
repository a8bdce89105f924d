/* The block layouts the kernels read: GGUF's own (Q4_K, Q6_K, Q8_0), byte for byte, so a GGUF
 * file's tensors are used as they are stored, and the activations' (int8 with one scale per block).
 *
 * A weight row of K values is K/256 super-blocks (Q4_K, Q6_K) or K/32 blocks (Q8_0); the
 * activation row it meets is K/256 `act_k` blocks or K/32 `act_32` blocks. Every dot product is
 * integer inside a block and float across blocks, summed in one fixed order: a row's result depends
 * on that row alone, never on how many rows share the call or how the work is split among threads
 * (decoding/qkernel.py relies on it).
 */
#ifndef SPECD_BLOCKS_H
#define SPECD_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define QK 256        /* weights per K-quant super-block */
#define QB 32         /* values per activation block and per Q8_0 block */

typedef struct {      /* Q4_K: w = d * sc[j] * q - dmin * m[j], j the 32-weight sub-block */
    uint16_t d, dmin; /* fp16 */
    uint8_t scales[12];   /* 8 six-bit scales and 8 six-bit minimums, packed */
    uint8_t qs[128];      /* chunk c of 32 bytes: low nibbles sub-block 2c, high nibbles 2c+1 */
} block_q4k;

typedef struct {      /* Q6_K: w = d * sc[i] * (q - 32), i the 16-weight sub-block */
    uint8_t ql[128];      /* low four bits */
    uint8_t qh[64];       /* high two bits */
    int8_t scales[16];
    uint16_t d;           /* fp16 */
} block_q6k;

typedef struct {      /* Q8_0: w = d * q */
    uint16_t d;           /* fp16 */
    int8_t qs[32];
} block_q80;

typedef struct {      /* 32 activations for Q8_0 weights: x ~= d * q */
    float d;
    int8_t q[32];
} act_32;

typedef struct {      /* 256 activations for K-quant weights: x ~= d * q, with sums of each 16 q */
    float d;
    int16_t sums[16];
    int8_t q[256];
} act_k;

_Static_assert(sizeof(block_q4k) == 144, "Q4_K is 144 bytes");
_Static_assert(sizeof(block_q6k) == 210, "Q6_K is 210 bytes");
_Static_assert(sizeof(block_q80) == 34, "Q8_0 is 34 bytes");
_Static_assert(sizeof(act_32) == 36, "a Q8_0 activation block is 36 bytes");
_Static_assert(sizeof(act_k) == 292, "a K-quant activation block is 292 bytes");

float fp16_to_float(uint16_t h);

/* A pass reads each weight once, from memory, and the hardware prefetcher alone left the kernels
 * waiting on it: the built-in target's matmuls read 9 GB/s where two cores stream 20 (2-core Xeon).
 * So each block asks for the bytes PREFETCH past it: measured 4, 8, 16 and 32 Q4_K blocks ahead,
 * 16 was best (the width-1 matmuls 2.2x faster; width 4 1.4x). A prefetch never faults, so asking
 * past a tensor's end is harmless. */
#define PREFETCH 2304
static inline void ahead(const void *block, int bytes) {
    for (int i = 0; i < bytes; i += 64) __builtin_prefetch((const char *)block + PREFETCH + i, 0, 3);
}

/* Q4_K's packed six-bit scale and minimum of sub-block j (0..7) */
static inline void q4k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K's eight six-bit scales (sc) and minimums (m) of a super-block, as bytes */
static inline void q4k_unpack(const uint8_t *s, uint8_t sc[8], uint8_t m[8]) {
    uint32_t a, b, c;
    memcpy(&a, s, 4), memcpy(&b, s + 4, 4), memcpy(&c, s + 8, 4);
    uint32_t out[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u),
                       b & 0x3f3f3f3fu, ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
    memcpy(sc, out, 8), memcpy(m, out + 2, 8);
}

/* one weight row against one activation row, K values: the portable versions, the AVX2 ones and
 * (K-quants only) the AVX-VNNI and AVX-512 ones */
float dot_q4k(const block_q4k *w, const act_k *x, int k);
float dot_q6k(const block_q6k *w, const act_k *x, int k);
float dot_q80(const block_q80 *w, const act_32 *x, int k);
/* the SIMD K-quant kernels take up to ROWS activation rows at once, `x_stride` blocks apart: each
 * run of weights is decoded once for all of them (8 rather than 4: a prefill's rows 13% cheaper
 * with AVX2 and AVX-VNNI, measured on the built-in target) */
#define ROWS 8
void dot_q4k_avx2(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q6k_avx2(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q4k_avx2_paired(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q6k_avx2_paired(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out);
float dot_q80_avx2(const block_q80 *w, const act_32 *x, int k);
void dot_q4k_avxvnni(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q6k_avxvnni(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q4k_avx512(const block_q4k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void dot_q6k_avx512(const block_q6k *w, const act_k *x, int x_stride, int rows, int k, float *out);
void quantize_k(const float *x, act_k *out, int k);
void quantize_32(const float *x, act_32 *out, int k);
void quantize_k_avx2(const float *x, act_k *out, int k);
void quantize_k_avx2_paired(const float *x, act_k *out, int k);  /* the layout the _paired kernels read */
/* K-quant weights into the paired layout (to_paired) or back (layout.c; the AVX2 versions pair only) */
void q4k_relayout(block_q4k *w, size_t count, int to_paired);
/* a block's 256 quants (0..15, 0..63) in value order, as the file lays them out (layout.c) */
void q4k_values(const block_q4k *w, uint8_t v[QK]);
void q6k_values(const block_q6k *w, uint8_t v[QK]);
void q6k_relayout(block_q6k *w, size_t count, int to_paired);
void relayout_q4k_avx2(block_q4k *w, size_t count);
void relayout_q6k_avx2(block_q6k *w, size_t count);
void quantize_32_avx2(const float *x, act_32 *out, int k);

#endif
