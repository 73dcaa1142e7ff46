/* Held-out CPU-only NVTX workload (nsys 2022.4): not used while developing the analyses.
 * Two named domains, three nesting levels, a start/end range that ends on another thread,
 * ranges on three threads at once, and marks. Built by scripts/make_fixtures_cpu.sh. */
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

static nvtxDomainHandle_t io, net;
static nvtxRangeId_t handoff;

static void push(nvtxDomainHandle_t d, const char *name) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(d, &a);
}

static void *reader(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 5; i++) {
        push(io, "read");
        spin_us(100 + 50 * id);
        push(io, "decode");
        spin_us(80);
        nvtxDomainRangePop(io);
        nvtxDomainRangePop(io);
    }
    if (id == 1) nvtxRangeEnd(handoff); /* a start/end range ending on another thread */
    return NULL;
}

int main(void) {
    io = nvtxDomainCreateA("io");
    net = nvtxDomainCreateA("net");
    handoff = nvtxRangeStartA("handoff");
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, reader, (void *)i);
    for (int e = 0; e < 4; e++) {
        push(net, "epoch");
        for (int b = 0; b < 3; b++) {
            push(net, "batch");
            push(net, "send");
            spin_us(e == 0 && b == 0 ? 2000 : 200);
            nvtxDomainRangePop(net);
            nvtxDomainRangePop(net);
        }
        nvtxDomainRangePop(net);
        nvtxMarkA("epoch done");
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("cpu_holdout done\n");
    return 0;
}
