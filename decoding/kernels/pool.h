/* A small pool of worker threads that split a range of output columns with the calling thread. */
#ifndef SPECD_POOL_H
#define SPECD_POOL_H

typedef void (*pool_task)(void *arg, int start, int end);

/* Run task(arg, start, end) over [0, total) split into one contiguous part per thread, each a
 * multiple of `align` long (but the last); returns when every part is done. */
void pool_run(pool_task task, void *arg, int total, int align);

/* The threads in use (the caller's included). */
int pool_threads(void);

/* The threads to use from now on (1 runs everything on the caller); returns the count in use. */
int specd_threads(int n);

#endif
