/* CPU-only NVTX workload whose names are hostile to a page that does not escape them:
 * markup with event handlers, a closing </script>, quotes, ampersands, newlines and pipes,
 * in range names, a domain name and a mark. The HTML report must show them as text (the
 * escaping test, tests/test_html.py). Names that a spreadsheet would run as formulas
 * (starting with = + - @ tab CR, a counter family and a domain among them) and names with
 * terminal escape sequences and other control characters: CSV cells neutralised, controls
 * shown escaped (tests/test_writes.py). The first instance of the repeated range is slow, so
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
static const char *FORMULAS[] = {
    "=HYPERLINK(\"ht" "tp://example.invalid\",\"click\")",  /* one string, split */
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\tTAB first",
    "\rCR first",
};
static const char *FORMULA_STEPS[] = {"=step 1", "=step 2", "=step 3", "=step 4"};
static const char *FORMULA_DOMAIN = "@dom";
/* ESC sequences (a colour, a window title ended by BEL), DEL and a C1 control (U+009B). */
static const char *CONTROLS = "\x1b[31mred\x1b[0m \x1b]0;title\x07 del\x7f csi\xc2\x9b" "1m";

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
    /* Formula-like names, each twice, and a counter family holding the control characters. */
    for (int i = 0; i < 2; i++) {
        for (unsigned k = 0; k < sizeof FORMULAS / sizeof *FORMULAS; k++) {
            nvtxRangePushA(FORMULAS[k]);
            spin_us(100);
            nvtxRangePop();
        }
    }
    /* The first of each is slow: COLD_START names them too (the step alone at
     * -t cold_factor=15: 22x its median, the others 10x). */
    for (unsigned k = 0; k < sizeof FORMULA_STEPS / sizeof *FORMULA_STEPS; k++) {
        nvtxRangePushA(FORMULA_STEPS[k]);
        spin_us(k == 0 ? 8000 : 300);
        nvtxRangePushA(CONTROLS);
        spin_us(k == 0 ? 1000 : 100);
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxDomainHandle_t formula_dom = nvtxDomainCreateA(FORMULA_DOMAIN);
    for (int i = 0; i < 2; i++) {
        push(formula_dom, "+in a domain");
        spin_us(100);
        nvtxDomainRangePop(formula_dom);
    }
    nvtxDomainDestroy(formula_dom);
    nvtxMarkA(IMG);
    nvtxDomainDestroy(dom);
    return 0;
}
