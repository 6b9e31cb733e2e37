// What a scheduling order, and prefetching, can give on this host for the affinity suite's
// synthetic_1024 pattern, without any runtime: G working sets of 64 KiB (a random cycle each,
// 1024 dependent loads per sweep), swept for 64 rounds per group, in the same order every round
// ("fixed", No Affinity's pattern) or in the reverse of the last round's order ("reverse",
// Virtual Time's); "+pf" prefetches every line of the set that runs next before each sweep.
// Prints microseconds of thread CPU time per sweep, three times each (the host is shared).
//
//   cc -O2 -o /tmp/order-ceiling scripts/order-ceiling.c && /tmp/order-ceiling 16 8
//   (G = 16 working sets per group, 8 groups)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "order-sets.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void prefetch_set(const line_t *s) {
    for (int i = 0; i < LINES; i++) __builtin_prefetch(&s[i]);
}

int main(int argc, char **argv) {
    int group = argc > 1 ? atoi(argv[1]) : 16, groups = argc > 2 ? atoi(argv[2]) : 8, rounds = 64;
    if (group < 1 || groups < 1) return 2;
    size_t sets = (size_t)group * groups;
    line_t *all = aligned_alloc(4096, sets * LINES * sizeof(line_t));
    if (!all) return 1;
    fill_sets(all, sets);
    const char *names[] = {"fixed", "reverse", "fixed+pf", "reverse+pf"};
    uint64_t sum = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (int mode = 0; mode < 4; mode++) {
            double t0 = now();
            for (int g = 0; g < groups; g++) {
                const line_t *base = all + (size_t)g * group * LINES;
                for (int r = 0; r < rounds; r++) {
                    int rev = (mode & 1) && (r & 1);
                    for (int k = 0; k < group; k++) {
                        int i = rev ? group - 1 - k : k;
                        if (mode >= 2 && k + 1 < group)
                            prefetch_set(base + (size_t)(rev ? group - 2 - k : k + 1) * LINES);
                        sum += sweep(base + (size_t)i * LINES);
                    }
                }
            }
            double us = (now() - t0) / ((double)groups * rounds * group) * 1e6;
            printf("G=%d %-11s %.2f us/sweep\n", group, names[mode], us);
        }
    }
    // (The checksum keeps the sweeps from being optimized away: every sweep sums 0..1023.)
    uint64_t want = 3ull * 4 * groups * rounds * group * (LINES * (LINES - 1) / 2);
    printf("checksum %s\n", sum == want ? "ok" : "WRONG");
    return sum == want ? 0 : 1;
}
