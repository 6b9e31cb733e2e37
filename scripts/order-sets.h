// The working sets of the affinity suite's synthetic_1024 pattern, shared by the order-*.c
// scripts: a set is LINES cache lines of 64 bytes linked in one random cycle (1024 dependent
// loads per sweep, 64 KiB).
#include <stddef.h>
#include <stdint.h>

#define LINES 1024
typedef struct {
    uint32_t next;
    uint32_t pad[15];
} line_t;

// One sweep of a set: follows its cycle once; the sum of the indices keeps the loads alive.
static uint64_t sweep(const line_t *s) {
    uint64_t at = 0, sum = 0;
    for (int i = 0; i < LINES; i++) {
        at = s[at].next;
        sum += at;
    }
    return sum;
}

// Links each of the `sets` sets in `all` into one random cycle through all its lines
// (Sattolo's algorithm, from a fixed xorshift seed, so every run builds the same sets).
static void fill_sets(line_t *all, size_t sets) {
    uint64_t x = 88172645463325252ull;
    static uint32_t order[LINES];
    for (size_t s = 0; s < sets; s++) {
        for (int i = 0; i < LINES; i++) order[i] = i;
        for (int i = LINES - 1; i > 0; i--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int j = x % i;
            uint32_t t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int k = 0; k < LINES; k++) all[s * LINES + k].next = order[k];
    }
}
