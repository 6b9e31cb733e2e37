// Where, in a round, the affinity suite's synthetic_1024 sweeps find their working set still in
// the private cache, without any runtime: G working sets of 64 KiB (a random cycle each, 1024
// dependent loads per sweep) in each of `groups` groups, swept for 64 rounds per group in one of
// three orders, each sweep timed with rdtsc; prints, per position in a round, the median sweep
// (thousands of TSC ticks) over every round but the first, and their sum.
//
//   fixed      the same order every round (the `order/fixed` row)
//   reverse    the reverse of the previous round's order (`order/reversed`, Virtual Time's)
//   head+fifo  the H sets swept last, most recent first, then the others in the previous
//              round's order (a reversal only of the head a cache could still hold)
//
//   cc -O2 -o /tmp/order-positions scripts/order-positions.c && /tmp/order-positions 16 4 3
//   (G = 16 working sets per group, 4 groups, H = 3)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "order-sets.h"

#define ROUNDS 64

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int group = argc > 1 ? atoi(argv[1]) : 16, groups = argc > 2 ? atoi(argv[2]) : 4;
    int head = argc > 3 ? atoi(argv[3]) : 3;
    if (group < 1 || group > 256 || groups < 1 || head < 0 || head > group) return 2;
    size_t sets = (size_t)group * groups;
    line_t *all = aligned_alloc(4096, sets * LINES * sizeof(line_t));
    uint64_t *ticks = malloc(sizeof(uint64_t) * groups * ROUNDS * group);
    uint64_t *column = malloc(sizeof(uint64_t) * groups * ROUNDS);
    if (!all || !ticks || !column) return 1;
    fill_sets(all, sets);
    const char *names[] = {"fixed", "reverse", "head+fifo"};
    uint64_t sum = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (int g = 0; g < groups; g++) {
            const line_t *base = all + (size_t)g * group * LINES;
            int now[256], next[256];
            for (int k = 0; k < group; k++) now[k] = k;
            for (int r = 0; r < ROUNDS; r++) {
                for (int k = 0; k < group; k++) {
                    uint64_t t0 = __rdtsc();
                    sum += sweep(base + (size_t)now[k] * LINES);
                    ticks[((size_t)g * ROUNDS + r) * group + k] = __rdtsc() - t0;
                }
                if (mode == 1) {
                    for (int k = 0; k < group; k++) next[k] = now[group - 1 - k];
                } else if (mode == 2) {
                    int n = 0;
                    for (int k = 0; k < head; k++) next[n++] = now[group - 1 - k];
                    for (int k = 0; k < group - head; k++) next[n++] = now[k];
                } else {
                    continue;
                }
                memcpy(now, next, sizeof(int) * group);
            }
        }
        double total = 0;
        printf("G=%d %-9s:", group, names[mode]);
        for (int k = 0; k < group; k++) {
            int n = 0;
            for (int g = 0; g < groups; g++)
                for (int r = 1; r < ROUNDS; r++) column[n++] = ticks[((size_t)g * ROUNDS + r) * group + k];
            qsort(column, n, sizeof(uint64_t), by_value);
            printf(" %.1f", column[n / 2] / 1e3);
            total += column[n / 2] / 1e3;
        }
        printf("  sum %.0f\n", total);
    }
    // (Every sweep sums 0..1023; the check keeps the sweeps from being optimized away.)
    uint64_t want = 3ull * groups * ROUNDS * group * (LINES * (LINES - 1) / 2);
    printf("checksum %s\n", sum == want ? "ok" : "WRONG");
    return sum == want ? 0 : 1;
}
