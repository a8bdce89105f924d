/* Attention for one query row, as specd's CPU passes compute it (attend.c): the row against the
 * keys at positions 0..last of one key/value head, by an online softmax over blocks of KEYS keys
 * counted from position 0, the keys and values IEEE halves (half.h) widened exactly as read.
 * Nothing in a row's arithmetic depends on the other rows of its pass, on how many there are, or
 * on the cache's length: a token's attention has the same bits however its prompt was chunked and
 * whatever width its pass had.
 */
#ifndef SPECD_ATTEND_H
#define SPECD_ATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "half.h"

#define KEYS 32       /* keys per block of the online softmax (fixed by position, never by the pass) */
#define MAX_DIM 256   /* the largest head dimension taken */

/* The constants of e^x for x <= 0 (Cephes' expf): n = rint(x log2 e), r = x - n ln 2 in two parts,
 * a degree-7 polynomial in r, times 2^n. Every body takes the same operations in the same order. */
#define EXP_LOW (-87.0f)     /* below it e^x is taken as e^-87 (~1.6e-38: nothing beside the row's top key) */
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO (-2.12194440e-4f)
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

#define HEADS_AT_ONCE 8   /* query heads of one key/value head swept over its keys together */
#define ROWS_AT_ONCE 8    /* and query rows: a verify pass's rows read each block of keys once, not once each */

/* The block of keys and values after block b (of a sweep up to key `final`) asked for into L2
 * while block b is computed: the hardware prefetcher alone left a width-1 pass's attention
 * waiting on memory. A prefetch changes no value. */
static inline void attend_ahead(const uint16_t *k, const uint16_t *v, int d, int b, int final) {
    if (b + KEYS > final) return;
    const char *keys = (const char *)(k + (size_t)(b + KEYS) * d), *values = (const char *)(v + (size_t)(b + KEYS) * d);
    for (size_t i = 0; i < (size_t)KEYS * d * sizeof(uint16_t); i += 64) {
        __builtin_prefetch(keys + i, 0, 2);
        __builtin_prefetch(values + i, 0, 2);
    }
}

/* For each of `rows` (<= ROWS_AT_ONCE) query rows r, `stride` floats apart in q and out, row r
 * seeing the keys 0..last + r, and each of `count` (<= HEADS_AT_ONCE) query heads h, d apart:
 * out_rh[0..d) = softmax(q_rh . k_j * scale over j <= last + r) weighted sum of v_j; key j at
 * k + j * d (halves). The rows and heads share each block of keys and values while it is in the
 * core's cache; each (row, head)'s arithmetic is its own, the same as if it were swept alone. */
typedef void (*attend_fn)(const float *q, int rows, size_t stride, int count, const uint16_t *k, const uint16_t *v,
                          int d, int last, float scale, float *out);

void attend_heads(const float *q, int rows, size_t stride, int count, const uint16_t *k, const uint16_t *v, int d,
                  int last, float scale, float *out);
#if defined(__x86_64__) || defined(_M_X64)
void attend_heads_avx2(const float *q, int rows, size_t stride, int count, const uint16_t *k, const uint16_t *v,
                       int d, int last, float scale, float *out);
#endif

#endif
