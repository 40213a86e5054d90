/* armhive-stream: a STREAM-style memory bandwidth kernel (copy, scale, add, triad).
 *
 * Written for armhive's `memory` benchmark suite (daemon/bench/stream_parser.h reads its
 * output); cross-compiled for aarch64 by the image builder (static, -O2) and also built for
 * the host on hosts of the guest's architecture, so the guest/host ratio compares one code.
 *
 * Usage: armhive-stream [-n ELEMENTS] [-t THREADS] [-i ITERATIONS]
 *   ELEMENTS   doubles per array (three arrays), default 8388608 (64 MiB each)
 *   THREADS    worker threads, each on its own slice of every array, default 1
 *   ITERATIONS timed passes of the four kernels (1..100), default 5; the best pass (minimum time)
 *              counts, as in McCalpin's STREAM. The untimed first pass faults the pages in.
 *
 * Bandwidth counts the bytes the kernel names (copy/scale: 2 arrays, add/triad: 3), in
 * MB/s = 10^6 bytes/s, as STREAM does. Output: one "key value" per line (see below); exit 0
 * only when the arrays hold the values the kernels must have produced ("validation ok").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARMHIVE_STREAM_VERSION "1"
#define ARMHIVE_STREAM_FLAGS "-O2 -static -pthread"

enum { kCopy, kScale, kAdd, kTriad, kKernels };
static const char *const kNames[kKernels] = {"copy", "scale", "add", "triad"};
static const int kArraysTouched[kKernels] = {2, 2, 3, 3};

static double *a, *b, *c;
static size_t n_elements;
static int n_threads;
static const double kScalar = 3.0;

struct slice {
  size_t begin, end;
  int kernel;
};

static pthread_barrier_t start_barrier, done_barrier;
static struct slice *slices;
static volatile int stop_workers;

static void run_kernel(int kernel, size_t begin, size_t end) {
  size_t j;
  switch (kernel) {
    case kCopy:
      for (j = begin; j < end; j++) c[j] = a[j];
      break;
    case kScale:
      for (j = begin; j < end; j++) b[j] = kScalar * c[j];
      break;
    case kAdd:
      for (j = begin; j < end; j++) c[j] = a[j] + b[j];
      break;
    case kTriad:
      for (j = begin; j < end; j++) a[j] = b[j] + kScalar * c[j];
      break;
  }
}

static void *worker(void *arg) {
  struct slice *s = arg;
  for (;;) {
    pthread_barrier_wait(&start_barrier);
    if (stop_workers) return NULL;
    run_kernel(s->kernel, s->begin, s->end);
    pthread_barrier_wait(&done_barrier);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs one kernel on every thread (thread 0 is this one) and returns its wall time. */
static double timed(int kernel) {
  int t;
  for (t = 0; t < n_threads; t++) slices[t].kernel = kernel;
  double t0 = now_s();
  pthread_barrier_wait(&start_barrier);
  run_kernel(kernel, slices[0].begin, slices[0].end);
  pthread_barrier_wait(&done_barrier);
  return now_s() - t0;
}

static int parse_positive(const char *s, long long max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > max) return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  long long elements = 8388608, threads = 1, iterations = 5;
  int i;
  for (i = 1; i < argc; i++) {
    long long *target = NULL, max = 0;
    if (strcmp(argv[i], "-n") == 0) {
      target = &elements;
      max = 1LL << 32;
    } else if (strcmp(argv[i], "-t") == 0) {
      target = &threads;
      max = 1024;
    } else if (strcmp(argv[i], "-i") == 0) {
      target = &iterations;
      max = 100; /* the values grow 15x per pass: 15^101 still fits a double */
    } else if (strcmp(argv[i], "--version") == 0) {
      printf("armhive-stream %s (gcc %s, %s)\n", ARMHIVE_STREAM_VERSION, __VERSION__,
             ARMHIVE_STREAM_FLAGS);
      return 0;
    }
    if (target == NULL || i + 1 >= argc || parse_positive(argv[i + 1], max, target) != 0) {
      fprintf(stderr, "usage: armhive-stream [-n ELEMENTS] [-t THREADS] [-i ITERATIONS]\n");
      return 2;
    }
    i++;
  }
  if ((long long)threads > elements) threads = elements;
  n_elements = (size_t)elements;
  n_threads = (int)threads;
  size_t bytes = n_elements * sizeof(double);
  if (posix_memalign((void **)&a, 64, bytes) != 0 || posix_memalign((void **)&b, 64, bytes) != 0 ||
      posix_memalign((void **)&c, 64, bytes) != 0) {
    fprintf(stderr, "armhive-stream: cannot allocate 3 x %zu bytes\n", bytes);
    return 1;
  }
  slices = calloc((size_t)n_threads, sizeof(*slices));
  pthread_t *tids = calloc((size_t)n_threads, sizeof(*tids));
  if (slices == NULL || tids == NULL) return 1;
  for (i = 0; i < n_threads; i++) {
    slices[i].begin = n_elements * (size_t)i / (size_t)n_threads;
    slices[i].end = n_elements * (size_t)(i + 1) / (size_t)n_threads;
  }
  pthread_barrier_init(&start_barrier, NULL, (unsigned)n_threads);
  pthread_barrier_init(&done_barrier, NULL, (unsigned)n_threads);
  for (i = 1; i < n_threads; i++) {
    if (pthread_create(&tids[i], NULL, worker, &slices[i]) != 0) {
      fprintf(stderr, "armhive-stream: cannot start thread %d\n", i);
      return 1;
    }
  }
  for (size_t j = 0; j < n_elements; j++) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
  double best[kKernels];
  for (int k = 0; k < kKernels; k++) best[k] = INFINITY;
  for (long long it = 0; it <= iterations; it++) {
    for (int k = 0; k < kKernels; k++) {
      double t = timed(k);
      if (it > 0 && t < best[k]) best[k] = t;
    }
  }
  stop_workers = 1;
  pthread_barrier_wait(&start_barrier);
  for (i = 1; i < n_threads; i++) pthread_join(tids[i], NULL);

  /* Expected values after iterations+1 passes, computed the way STREAM checks them. */
  double ea = 1.0, eb = 2.0, ec = 0.0;
  for (long long it = 0; it <= iterations; it++) {
    ec = ea;
    eb = kScalar * ec;
    ec = ea + eb;
    ea = eb + kScalar * ec;
  }
  double err = 0;
  for (size_t j = 0; j < n_elements; j += 4099) {
    err = fmax(err, fabs(a[j] - ea) / ea + fabs(b[j] - eb) / eb + fabs(c[j] - ec) / ec);
  }
  printf("armhive-stream %s\n", ARMHIVE_STREAM_VERSION);
  printf("compiler gcc %s\n", __VERSION__);
  printf("flags %s\n", ARMHIVE_STREAM_FLAGS);
  printf("array_elements %zu\n", n_elements);
  printf("array_bytes %zu\n", bytes);
  printf("threads %d\n", n_threads);
  printf("iterations %lld\n", iterations);
  for (int k = 0; k < kKernels; k++) {
    double mb = (double)kArraysTouched[k] * (double)bytes / 1e6;
    printf("%s_mb_s %.1f\n", kNames[k], best[k] > 0 ? mb / best[k] : 0.0);
    printf("%s_best_s %.6f\n", kNames[k], best[k]);
  }
  if (err > 1e-13) {
    printf("validation failed %.3e\n", err);
    return 3;
  }
  printf("validation ok\n");
  return 0;
}
