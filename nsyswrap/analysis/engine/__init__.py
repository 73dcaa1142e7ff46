"""The one per-range engine (analyze.py, `measure`): a report's GPU operations in
time-ordered chunks, from the export as it is read or from a report loaded whole
(sources.py), added up per range by totals.py (with slots.py and open_values.py). It
returns what it measured; the steps around it are analysis/steps.py."""
