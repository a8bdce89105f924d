/* The paired layout of K-quant weights, which the AVX2 body reads with one multiply fewer per 64
 * weights (dot_avx2.c says how): laid out once, when a model is loaded, so no call pays for it.
 *
 * A super-block's 256 values are four runs of 64, each two runs of 32 (a, b) with their own
 * scales. Paired, each 64 sit as two vectors of 32 whose 32-bit lane i holds a[4i], a[4i+1],
 * b[4i], b[4i+1], then a[4i+2], a[4i+3], b[4i+2], b[4i+3]. Only the quants move, stored in the
 * type's own encoding (nibbles for Q4_K; low nibbles and high bit pairs for Q6_K); scales, minimums
 * and d stay where they were, so a paired block is as large as the file's and the weights are the
 * same numbers. specd's own type numbers name the layout (GGML's + 100), so a body is never handed
 * a layout it does not read: the portable code reads a paired block by putting it back first.
 */
#include <string.h>

#include "blocks.h"

/* where value q (0..63) of a paired run of 64 comes from in the file's order */
static int source(int q) {
    int half = q / 32, lane = (q % 32) / 4, t = q % 4;
    return (t < 2 ? 0 : 32) + 4 * lane + (t & 1) + 2 * half;
}

/* each 64 of `v` [256] paired (to_paired) or put back */
static void permute(uint8_t v[QK], int to_paired) {
    uint8_t run[64];
    for (int r = 0; r < QK; r += 64) {
        memcpy(run, v + r, 64);
        for (int q = 0; q < 64; q++) {
            if (to_paired) v[r + q] = run[source(q)];
            else v[r + source(q)] = run[q];
        }
    }
}

void q4k_values(const block_q4k *w, uint8_t v[QK]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) v[64 * c + l] = w->qs[32 * c + l] & 15, v[64 * c + 32 + l] = w->qs[32 * c + l] >> 4;
}

static void q4k_store(block_q4k *w, const uint8_t v[QK]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) w->qs[32 * c + l] = (uint8_t)(v[64 * c + l] | v[64 * c + 32 + l] << 4);
}

/* Q6_K value i: half i / 128; quarter (i % 128) / 32 takes ql's low or high nibbles and qh's bits
 * 2 * quarter, 2 * quarter + 1 (as dot.c's dequantization reads them) */
void q6k_values(const block_q6k *w, uint8_t v[QK]) {
    for (int i = 0; i < QK; i++) {
        int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
        int low = w->ql[64 * half + 32 * (quarter & 1) + l];
        v[i] = (uint8_t)((quarter < 2 ? low & 15 : low >> 4) | ((w->qh[32 * half + l] >> (2 * quarter)) & 3) << 4);
    }
}

static void q6k_store(block_q6k *w, const uint8_t v[QK]) {
    memset(w->ql, 0, sizeof w->ql), memset(w->qh, 0, sizeof w->qh);
    for (int i = 0; i < QK; i++) {
        int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
        w->ql[64 * half + 32 * (quarter & 1) + l] |= (uint8_t)((v[i] & 15) << (quarter < 2 ? 0 : 4));
        w->qh[32 * half + l] |= (uint8_t)((v[i] >> 4) << (2 * quarter));
    }
}

/* `count` blocks in place, into the paired layout or back */
void q4k_relayout(block_q4k *w, size_t count, int to_paired) {
    uint8_t v[QK];
    for (size_t b = 0; b < count; b++) q4k_values(w + b, v), permute(v, to_paired), q4k_store(w + b, v);
}

void q6k_relayout(block_q6k *w, size_t count, int to_paired) {
    uint8_t v[QK];
    for (size_t b = 0; b < count; b++) q6k_values(w + b, v), permute(v, to_paired), q6k_store(w + b, v);
}
