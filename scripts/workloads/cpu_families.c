/* CPU-only NVTX workload for Debian's nsys 2022.4: range names as training loops write them.
 * Plants, each checked against SQL by tests/test_families.py:
 *   - a counter family: "step 0" ... "step 7" (the first step 10x slower: a cold start that
 *     only the family shows, as each name occurs once);
 *   - cycling numbered names inside every step: "layer1", "layer2", "layer3" (distinct
 *     ranges that happen to be numbered, not a counter);
 *   - a second counter on another thread: "iter_1" ... "iter_5";
 *   - a library's ranges: "ncclAllReduce" in the "NCCL" domain and PyTorch-style operator
 *     ranges "aten::mm" in the default domain, each with a slow first instance (a cold
 *     start that is the library's business, reported only with --all-domains).
 * Built and profiled by scripts/make_fixtures_cpu.sh.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static void spin_us(long us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static nvtxDomainHandle_t nccl;

static void *worker(void *arg) {
    (void)arg;
    char name[32];
    for (int i = 1; i <= 5; i++) {
        snprintf(name, sizeof name, "iter_%d", i);
        nvtxRangePushA(name);
        spin_us(200);
        nvtxRangePop();
    }
    return NULL;
}

int main(void) {
    nccl = nvtxDomainCreateA("NCCL");
    char name[32];
    for (int step = 0; step < 8; step++) {
        snprintf(name, sizeof name, "step %d", step);
        nvtxRangePushA(name);
        spin_us(step == 0 ? 4000 : 400);
        for (int layer = 1; layer <= 3; layer++) {
            snprintf(name, sizeof name, "layer%d", layer);
            nvtxRangePushA(name);
            nvtxRangePushA("aten::mm");
            spin_us(step == 0 ? 2000 : 100);
            nvtxRangePop();
            nvtxRangePop();
        }
        nvtxEventAttributes_t a = {0};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "ncclAllReduce";
        nvtxDomainRangePushEx(nccl, &a);
        spin_us(step == 0 ? 3000 : 150);
        nvtxDomainRangePop(nccl);
        nvtxRangePop();
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 0;
}
