/* CPU-only NVTX workload for Debian's nsys 2022.4 (no GPU needed).
 * Plants: nested push/pop ranges, a named domain, registered strings, start/end ranges,
 * marks (one carrying JSON), a second thread, and a repeated range whose first
 * instance is slow (cold start). Built and profiled by scripts/make_fixtures_cpu.sh.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static void spin_us(long us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static nvtxDomainHandle_t app;

static void push(const char *name) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtxDomainRegisterStringA(app, name);
    nvtxDomainRangePushEx(app, &a);
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 4; i++) {
        push("worker_iter");
        spin_us(300);
        nvtxDomainRangePop(app);
    }
    return NULL;
}

int main(void) {
    app = nvtxDomainCreateA("app");
    /* Repeated range: the first instance is 10x slower (cold start). */
    for (int i = 0; i < 8; i++) {
        push("iteration");
        spin_us(i == 0 ? 5000 : 500);
        nvtxDomainRangePop(app);
    }
    /* Nested ranges in the default domain, ASCII messages. */
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("step");
        nvtxRangePushA("load");
        usleep(1000);
        nvtxRangePop();
        nvtxRangePushA("compute");
        spin_us(700);
        nvtxRangePop();
        nvtxRangePop();
    }
    /* Start/end range and a mark carrying JSON. */
    nvtxRangeId_t r = nvtxRangeStartA("startend");
    spin_us(400);
    nvtxRangeEnd(r);
    nvtxMarkA("{\"tool\": \"cpu_nvtx\", \"version\": 1}");
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);
    nvtxDomainDestroy(app);
    printf("cpu_nvtx done\n");
    return 0;
}
