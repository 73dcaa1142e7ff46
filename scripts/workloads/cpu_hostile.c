/* CPU-only NVTX workload whose names are hostile to a page that does not escape them:
 * markup with event handlers, a closing </script>, quotes, ampersands, newlines and pipes,
 * in range names, a domain name and a mark. The HTML report must show them as text (the
 * escaping test, tests/test_html.py). The first instance of the repeated range is slow, so
 * a COLD_START finding names a hostile range too. Built and profiled by
 * scripts/make_fixtures_cpu.sh (Debian's nsys 2022.4, no GPU).
 */
#include <nvtx3/nvToolsExt.h>
#include <time.h>

static void spin_us(long us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static const char *IMG = "<img src=x onerror=alert(1)>";
static const char *SCRIPT = "</script><script>alert(2)</script>";
static const char *QUOTES = "quote\" apos' amp& lt< gt> back\\slash";
static const char *NEWLINE = "line one\nline two\r\ttab";
static const char *PIPES = "a|b||c | `code` *star* [link](x)";
static const char *DOMAIN = "<b onmouseover=alert(3)>dom</b>";

static void push(nvtxDomainHandle_t d, const char *name) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(d, &a);
}

int main(void) {
    nvtxDomainHandle_t dom = nvtxDomainCreateA(DOMAIN);
    /* Repeated hostile range in the hostile domain: the first instance is cold. */
    for (int i = 0; i < 6; i++) {
        push(dom, IMG);
        spin_us(i == 0 ? 4000 : 400);
        nvtxDomainRangePop(dom);
    }
    /* Hostile names in the default domain, nested. */
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA(SCRIPT);
        nvtxRangePushA(QUOTES);
        spin_us(200);
        nvtxRangePop();
        nvtxRangePushA(NEWLINE);
        spin_us(150);
        nvtxRangePop();
        nvtxRangePushA(PIPES);
        spin_us(100);
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxMarkA(IMG);
    nvtxDomainDestroy(dom);
    return 0;
}
