// ember: OpenBLAS's threaded jobs on the OpenMP pool (ember/_blas_threads.py)
#include <omp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <vector>

typedef void (*dojob_t)(int thread_num, void* jobdata, int dojob_data);
struct job_t { dojob_t dojob; int i; char* data; int dd; };
static int64_t calls = 0;
// one call at a time: OpenBLAS gives job k of every call the same per-thread buffer (it indexes
// its buffers by the thread number we pass), so two calls at once from two Python threads
// would write each other's packed panels (measured: wrong products)
static pthread_mutex_t one_call = PTHREAD_MUTEX_INITIALIZER;

static void* run_job(void* p) {
    job_t* j = (job_t*)p;
    j->dojob(j->i, j->data, j->dd);
    return nullptr;
}

// jobs [lo, hi) on fresh pthreads while the caller runs job `own`: every job needs a thread of
// its own because OpenBLAS's GEMM jobs wait on each other's packed panels
static void run_spread(dojob_t dojob, int own, int lo, int hi, char* data, size_t el, int dd) {
    std::vector<job_t> js;
    std::vector<pthread_t> th;
    std::vector<char> ok;
    js.reserve(hi - lo); th.resize(hi - lo); ok.resize(hi - lo);
    for (int i = lo; i < hi; ++i) js.push_back(job_t{dojob, i, data + (size_t)i * el, dd});
    for (int k = 0; k < hi - lo; ++k) ok[k] = pthread_create(&th[k], nullptr, run_job, &js[k]) == 0;
    dojob(own, data + (size_t)own * el, dd);
    for (int k = 0; k < hi - lo; ++k) {
        if (ok[k]) pthread_join(th[k], nullptr);
        else run_job(&js[k]);   // no thread could be made: run it last, here
    }
}

extern "C" void ember_blas_threads(int sync, dojob_t dojob, int numjobs, size_t el, void* jobdata, int dd) {
    (void)sync;  // OpenBLAS waits for the jobs in either case: run them to completion
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    char* data = (char*)jobdata;
    pthread_mutex_lock(&one_call);
    if (numjobs <= 1) {
        if (numjobs == 1) dojob(0, data, dd);
    } else if (omp_in_parallel()) {     // nested: the team would be one thread
        run_spread(dojob, 0, 1, numjobs, data, el, dd);
    } else {
        #pragma omp parallel num_threads(numjobs)
        {
            int t = omp_get_thread_num(), n = omp_get_num_threads();
            if (t == 0 && n < numjobs) run_spread(dojob, 0, n, numjobs, data, el, dd);
            else dojob(t, data + (size_t)t * el, dd);
        }
    }
    pthread_mutex_unlock(&one_call);
}

extern "C" int64_t ember_blas_thread_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
