"""One report's comparison: the one-report pipeline (load, analyse, diagnose: single.py),
the Comparison it gives (result.py) and that Comparison as plain rows, the document every
format lays out (document.py). Imports read/, analysis/, diagnose/; never render/."""
