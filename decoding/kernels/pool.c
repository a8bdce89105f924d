/* The worker threads: each waits for a new generation of work, spinning briefly (a pass calls
 * several hundred matmuls a few tens of microseconds apart) and then sleeping on a condition
 * variable, so an idle daemon costs no CPU. The caller does the first part itself. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pool.h"

#define MAX_THREADS 64
#define SPINS 4000         /* polling before a worker sleeps: a few tens of microseconds */

static struct {
    pthread_t threads[MAX_THREADS];
    int count;                     /* threads in use, the caller included */
    atomic_int generation;         /* bumped once per run */
    atomic_int pending;            /* workers still running the current generation */
    atomic_int sleepers;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pool_task task;
    void *arg;
    int total, align;
} pool = {.count = 1, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

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

static void *worker(void *arg) {
    int index = (int)(long)arg, seen = 0;
    for (;;) {
        int g = atomic_load(&pool.generation);
        for (int spin = 0; g == seen && spin < SPINS; spin++, g = atomic_load(&pool.generation)) relax();
        if (g == seen) {
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_add(&pool.sleepers, 1);
            while ((g = atomic_load(&pool.generation)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = g;
        if (index < pool.count) {
            int start, end;
            part(index, &start, &end);
            if (start < end) pool.task(pool.arg, start, end);
        }
        atomic_fetch_sub(&pool.pending, 1);
    }
    return NULL;
}

static int started = 1;  /* threads created so far, the caller counted */

int specd_threads(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    for (; started < n; started++) {
        if (pthread_create(&pool.threads[started], NULL, worker, (void *)(long)started) != 0) break;
        pthread_detach(pool.threads[started]);
    }
    pool.count = n < started ? n : started;
    return pool.count;
}

void pool_run(pool_task task, void *arg, int total, int align) {
    if (pool.count == 1 || total <= align) {
        task(arg, 0, total);
        return;
    }
    pool.task = task, pool.arg = arg, pool.total = total, pool.align = align;
    atomic_store(&pool.pending, started - 1);   /* every created worker answers, idle ones at once */
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.generation, 1);
    if (atomic_load(&pool.sleepers) > 0) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    int start, end;
    part(0, &start, &end);
    task(arg, start, end);
    while (atomic_load(&pool.pending) > 0) relax();
}
