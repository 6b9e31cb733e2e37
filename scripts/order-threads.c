// What ordering alone gives the affinity suite's synthetic_1024 pattern on one core and on two
// at once, without any runtime: T threads (1 or 2), thread t pinned to CPU t, each with its own
// `groups` groups of G working sets of 64 KiB (a random cycle each, 1024 dependent loads per
// sweep), each group swept for 32 rounds, after one untimed sweep of every set, in the same order
// every round ("fixed", No Affinity's pattern) or in the reverse of the last round's order
// ("reversed", Virtual Time's). The threads start together. Prints per thread the median sweep
// at every eighth position of a round (over the rounds after the first), the sum of the
// positions' medians over G, the mean sweep, and thread CPU and wall time per sweep, in
// microseconds: the 2-thread run says whether one core's sweeps slow the other's (the L3, the
// memory, the host), which a 1-processor `order/*` row cannot.
//
//   cc -O2 -pthread -o /tmp/order-threads scripts/order-threads.c
//   /tmp/order-threads 2 1 64 4   (2 threads, reversed, G = 64, 4 groups each)
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "order-sets.h"

#define ROUNDS 32

static int G = 64, GROUPS = 4, REVERSE = 1, T = 1;
static double TSC_GHZ = 1;
static pthread_barrier_t start;

typedef struct {
    int t;
    line_t *all;
    uint64_t *ticks, sum;
    double cpu_us, wall_us;
} thread_t;

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double now_us(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *run(void *arg) {
    thread_t *a = arg;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(a->t, &cpus);
    pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
    size_t sets = (size_t)G * GROUPS;
    for (size_t s = 0; s < sets; s++) a->sum += sweep(a->all + s * LINES);
    pthread_barrier_wait(&start);
    double c0 = now_us(CLOCK_THREAD_CPUTIME_ID), w0 = now_us(CLOCK_MONOTONIC);
    for (int g = 0; g < GROUPS; g++) {
        const line_t *base = a->all + (size_t)g * G * LINES;
        int now[1024], next[1024];
        for (int k = 0; k < G; k++) now[k] = k;
        for (int r = 0; r < ROUNDS; r++) {
            for (int k = 0; k < G; k++) {
                uint64_t t0 = __rdtsc();
                a->sum += sweep(base + (size_t)now[k] * LINES);
                a->ticks[((size_t)g * ROUNDS + r) * G + k] = __rdtsc() - t0;
            }
            if (REVERSE) {
                for (int k = 0; k < G; k++) next[k] = now[G - 1 - k];
                memcpy(now, next, sizeof(int) * G);
            }
        }
    }
    a->cpu_us = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
    a->wall_us = now_us(CLOCK_MONOTONIC) - w0;
    return 0;
}

int main(int argc, char **argv) {
    T = argc > 1 ? atoi(argv[1]) : 1;
    REVERSE = argc > 2 ? atoi(argv[2]) : 1;
    G = argc > 3 ? atoi(argv[3]) : 64;
    GROUPS = argc > 4 ? atoi(argv[4]) : 4;
    if (T < 1 || T > 2 || G < 1 || G > 1024 || GROUPS < 1) return 2;
    double w0 = now_us(CLOCK_MONOTONIC);
    uint64_t t0 = __rdtsc();
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, 0);
    TSC_GHZ = (__rdtsc() - t0) / ((now_us(CLOCK_MONOTONIC) - w0) * 1e3);
    pthread_barrier_init(&start, 0, T);
    thread_t threads[2];
    pthread_t ids[2];
    memset(threads, 0, sizeof threads);
    size_t sets = (size_t)G * GROUPS;
    // (Built one after the other: fill_sets keeps its permutation in a static array.)
    for (int t = 0; t < T; t++) {
        threads[t].t = t;
        threads[t].all = aligned_alloc(4096, sets * LINES * sizeof(line_t));
        threads[t].ticks = malloc(sizeof(uint64_t) * GROUPS * ROUNDS * G);
        if (!threads[t].all || !threads[t].ticks) return 1;
        fill_sets(threads[t].all, sets);
    }
    for (int t = 0; t < T; t++) pthread_create(&ids[t], 0, run, &threads[t]);
    for (int t = 0; t < T; t++) pthread_join(ids[t], 0);
    uint64_t *column = malloc(sizeof(uint64_t) * GROUPS * ROUNDS);
    int ok = 1;
    for (int t = 0; t < T; t++) {
        thread_t *a = &threads[t];
        double medians = 0, all = 0;
        int n_all = 0;
        printf("T=%d %s thread %d:", T, REVERSE ? "reversed" : "fixed", t);
        for (int k = 0; k < G; k++) {
            int n = 0;
            for (int g = 0; g < GROUPS; g++)
                for (int r = 1; r < ROUNDS; r++) {
                    uint64_t v = a->ticks[((size_t)g * ROUNDS + r) * G + k];
                    column[n++] = v;
                    all += v;
                    n_all++;
                }
            qsort(column, n, sizeof(uint64_t), by_value);
            medians += column[n / 2];
            if (k % 8 == 0 || k == G - 1) printf(" %d:%.1f", k, column[n / 2] / TSC_GHZ / 1e3);
        }
        // (Every sweep sums 0..1023; the check keeps the sweeps from being optimized away.)
        uint64_t want = (uint64_t)sets * (ROUNDS + 1) * (LINES * (LINES - 1) / 2);
        ok &= a->sum == want;
        printf(" | median/sweep %.2f mean/sweep %.2f cpu/sweep %.2f wall/sweep %.2f us%s\n",
               medians / G / TSC_GHZ / 1e3, all / n_all / TSC_GHZ / 1e3, a->cpu_us / (GROUPS * ROUNDS * G),
               a->wall_us / (GROUPS * ROUNDS * G), a->sum == want ? "" : " CHECKSUM WRONG");
    }
    return ok ? 0 : 1;
}
