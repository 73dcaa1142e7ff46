"""Names shared by the harness (which writes them into reports) and the analyses (which
read them back). Changing one is a format change: bump MARK_SCHEMA."""

HARNESS_DOMAIN = "nsyswrap"
MARK_SCHEMA = "nsyswrap.benchmark/1"
MARK_PART_SCHEMA = MARK_SCHEMA + "/part"
# `nsyswrap run --harness-only` sets CAPTURE_ENV; the harness then wraps each benchmark in
# CAPTURE_RANGE, where nsys (-c nvtx) starts collecting.
CAPTURE_ENV = "NSYSWRAP_CAPTURE_RANGE"
CAPTURE_RANGE = "nsyswrap.capture.profile"
# The harness's event-floor windows are NVTX ranges named "<benchmark> [event floor]".
FLOOR_RANGE_SUFFIX = " [event floor]"

# What `nsyswrap run`'s runner (nsyswrap/instrument/event_hooks.py, which keeps its own
# copy of these: the profiled process imports nothing of nsyswrap) writes into the report
# as NVTX marks:
# the program's own CUDA-event records, and the marks that tie its clock to the report's.
USER_EVENTS_SCHEMA = "nsyswrap.user-events/2"
USER_EVENTS_PART_SCHEMA = USER_EVENTS_SCHEMA + "/part"
# The earlier runner's documents, still read: 16-bit codes, no contexts.
USER_EVENTS_SCHEMA_1 = "nsyswrap.user-events/1"
USER_EVENTS_PART_SCHEMA_1 = USER_EVENTS_SCHEMA_1 + "/part"
# How every mark of the runner's documents (any version, whole or in parts) begins.
USER_EVENTS_MARK_PREFIX = '{"nsyswrap":"nsyswrap.user-events/'
# "0" turns the runner's hooks off (`nsyswrap run --no-user-events`).
USER_EVENTS_ENV = "NSYSWRAP_USER_EVENTS"
CLOCK_SCHEMA = "nsyswrap.clock/1"
# The runner's trace of the program's lines (line_trace.py), under "lines" in its document;
# "0" turns it off (`nsyswrap run --no-lines`), and the source text (`--no-source`).
LINES_SCHEMA = "nsyswrap.lines/1"
LINES_ENV = "NSYSWRAP_LINES"
SOURCE_ENV = "NSYSWRAP_SOURCE"
# The runner's event-floor windows, Timer measurements and do_bench calls (NVTX ranges of the
# default domain).
USER_FLOOR_RANGE = "nsyswrap.user-events [event floor]"
TIMER_RANGE_PREFIX = "nsyswrap.timer "
DO_BENCH_RANGE_PREFIX = "nsyswrap.do_bench "
# The runner's packed columns: each row's struct format (little-endian, no padding) and
# fields, for record() and elapsed_time() calls; and how many rows of each it keeps at most
# (beyond, it counts them): what the analysis reads, and the most it inflates.
USER_RECORD_FORMAT = "<qqIIIIIq"
USER_RECORD_FIELDS = ("before_ns", "took_ns", "thread", "event", "nth", "site", "context",
                      "stream")
USER_ELAPSED_FORMAT = "<qqIIIIIId"
USER_ELAPSED_FIELDS = ("before_ns", "after_ns", "thread", "start_event", "start_nth",
                       "end_event", "end_nth", "site", "value_ms")
USER_RECORD_FORMAT_1 = "<qqHIIHq"
USER_RECORD_FIELDS_1 = ("before_ns", "took_ns", "thread", "event", "nth", "site", "stream")
USER_ELAPSED_FORMAT_1 = "<qqHIIIIHd"
USER_ELAPSED_FIELDS_1 = USER_ELAPSED_FIELDS
USER_MAX_RECORDS = 4 << 20
USER_MAX_ELAPSED = 4 << 20
# Distinct call sites, contexts and threads the runner names at most (one overflow entry
# more stands for the rest), and the program's frames in a context.
USER_MAX_SITES = 1 << 20
USER_MAX_CONTEXTS = 1 << 16
USER_MAX_THREADS = 1 << 16
USER_CONTEXT_DEPTH = 8
