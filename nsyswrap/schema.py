"""Names shared by the harness (which writes them into reports) and the analyses (which
read them back). Changing one is a format change: bump MARK_SCHEMA."""

HARNESS_DOMAIN = "nsyswrap"
MARK_SCHEMA = "nsyswrap.benchmark/1"
MARK_PART_SCHEMA = MARK_SCHEMA + "/part"
# `nsyswrap run --harness-only` sets CAPTURE_ENV; the harness then wraps each benchmark in
# CAPTURE_RANGE, where nsys (-c nvtx) starts collecting.
CAPTURE_ENV = "NSYSWRAP_CAPTURE_RANGE"
CAPTURE_RANGE = "nsyswrap.capture"
# The harness's event-floor windows are NVTX ranges named "<benchmark> [event floor]".
FLOOR_RANGE_SUFFIX = " [event floor]"
