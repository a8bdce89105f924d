/* The worker threads. Each call splits [0, total) into one part per thread; the caller runs part 0
 * and then, rather than wait, runs itself every part whose worker has not claimed it yet (a
 * worker may be asleep, or not scheduled on a busy machine), so a call never waits for a thread
 * that is not running. A worker waits for work by spinning a few milliseconds (a pass calls ~200
 * matmuls, a few tens of microseconds apart) and then sleeps on a condition variable, so an idle
 * daemon costs no CPU. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "pool.h"

#define MAX_THREADS 64
#define SPINS 100000

static struct {
    int count;                          /* parts per call: threads in use, the caller included */
    atomic_llong generation;            /* one per call (64 bits: never wraps) */
    atomic_llong claimed[MAX_THREADS];    /* the generation in which part i was last claimed */
    atomic_llong finished[MAX_THREADS];   /* the generation in which part i was last finished */
    atomic_int sleepers;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pool_task task;
    void *arg;
    int total, align;
} pool = {.count = 1, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int started = 1;                 /* threads created so far, the caller counted */

static void part(int index, int *start, int *end) {
    int per = (pool.total + pool.count - 1) / pool.count;
    per = (per + pool.align - 1) / pool.align * pool.align;
    *start = index * per < pool.total ? index * per : pool.total;
    *end = *start + per < pool.total ? *start + per : pool.total;
}

static inline void relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

/* Run part `index` of generation `g` if no one has claimed it yet. */
static void run_part(int index, long long g) {
    long long seen = atomic_load(&pool.claimed[index]);
    do {
        if (seen >= g) return;          /* claimed by someone else */
    } while (!atomic_compare_exchange_weak(&pool.claimed[index], &seen, g));
    int start, end;
    part(index, &start, &end);
    if (start < end) pool.task(pool.arg, start, end);
    atomic_store(&pool.finished[index], g);
}

static long long next_generation(long long seen) {
    long long g = atomic_load(&pool.generation);
    for (int spin = 0; g == seen && spin < SPINS; spin++, g = atomic_load(&pool.generation)) relax();
    if (g == seen) {
        pthread_mutex_lock(&pool.lock);
        atomic_fetch_add(&pool.sleepers, 1);
        while ((g = atomic_load(&pool.generation)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        atomic_fetch_sub(&pool.sleepers, 1);
        pthread_mutex_unlock(&pool.lock);
    }
    return g;
}

static void *worker(void *arg) {
    int index = (int)(long)arg;
    long long seen = atomic_load(&pool.generation);
    for (;;) {
        seen = next_generation(seen);
        if (index < pool.count) run_part(index, seen);
    }
    return NULL;
}

int specd_threads(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    long long g = atomic_load(&pool.generation);
    for (; started < n; started++) {
        atomic_store(&pool.claimed[started], g);   /* nothing to claim until the next call */
        atomic_store(&pool.finished[started], g);
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, (void *)(long)started) != 0) break;
        pthread_detach(thread);
    }
    pool.count = n < started ? n : started;
    return pool.count;
}

int pool_threads(void) { return pool.count; }

void pool_run(pool_task task, void *arg, int total, int align) {
    if (pool.count == 1 || total <= align) {
        task(arg, 0, total);
        return;
    }
    pool.task = task, pool.arg = arg, pool.total = total, pool.align = align;
    pthread_mutex_lock(&pool.lock);
    long long g = atomic_fetch_add(&pool.generation, 1) + 1;
    if (atomic_load(&pool.sleepers) > 0) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.count; i++) run_part(i, g);          /* part 0, and any not yet claimed */
    for (int i = 1; i < pool.count; i++)
        for (int spin = 0; atomic_load(&pool.finished[i]) != g; spin++)
            if (spin % 1024 == 1023) sched_yield(); else relax();  /* a claimed part in progress */
}
