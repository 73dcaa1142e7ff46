/* CPU-only NVTX workload whose names are not UTF-8, as a C program may pass them: NVTX's
 * *A functions take bytes, and nsys stores them as they came. Latin-1 text ("caf\xe9") in a
 * range, a domain, a registered string, a mark and the main thread's NVTX name; a UTF-8
 * name cut mid-character (the first byte of "ï" alone); beside them good names, so that a
 * report of these still has ranges whose numbers can be checked. nsyswrap shows the bad bytes as
 * U+FFFD and says how many names were not UTF-8 (tests/test_not_utf8.py). Built and profiled
 * by scripts/make_fixtures_cpu.sh (Debian's nsys 2022.4, no GPU).
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void spin_us(long us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static const char *LATIN1 = "caf\xe9";            /* "café" in Latin-1: 0xE9 alone */
static const char *CUT = "na\xc3";                /* "naï" cut after the first byte of "ï" */
static const char *LATIN1_DOMAIN = "d\xe9p\xf4t";  /* "dépôt" in Latin-1 */
static const char *LATIN1_REGISTERED = "r\xe9gl\xe9";
static const char *LATIN1_MARK = "march\xe9";
static const char *LATIN1_THREAD = "th\xe9\xe2tre";   /* "théâtre" */

static void push(nvtxDomainHandle_t d, const char *name) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(d, &a);
}

static void push_registered(nvtxDomainHandle_t d, nvtxStringHandle_t s) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    nvtxDomainRangePushEx(d, &a);
}

int main(void) {
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), LATIN1_THREAD);
    for (int i = 0; i < 4; i++) {
        nvtxRangePushA("good step");
        spin_us(300);
        nvtxRangePushA(LATIN1);
        spin_us(200);
        nvtxRangePop();
        nvtxRangePushA(CUT);
        spin_us(100);
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxDomainHandle_t dom = nvtxDomainCreateA(LATIN1_DOMAIN);
    nvtxStringHandle_t registered = nvtxDomainRegisterStringA(dom, LATIN1_REGISTERED);
    for (int i = 0; i < 2; i++) {
        push(dom, "good in a bad domain");
        spin_us(150);
        nvtxDomainRangePop(dom);
        push_registered(dom, registered);
        spin_us(150);
        nvtxDomainRangePop(dom);
    }
    nvtxMarkA(LATIN1_MARK);
    nvtxDomainDestroy(dom);
    return 0;
}
