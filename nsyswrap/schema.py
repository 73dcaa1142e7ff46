"""Names shared by the harness (which writes them into reports) and the analyses (which
read them back). Changing one is a format change: bump MARK_SCHEMA."""

HARNESS_DOMAIN = "nsyswrap"
MARK_SCHEMA = "nsyswrap.benchmark/1"
MARK_PART_SCHEMA = MARK_SCHEMA + "/part"
WARMUP_SUFFIX = " [warmup]"
