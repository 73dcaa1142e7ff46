"""Reading an Nsight Systems export: the file opened read-only and its bulk reads started
(database.py, queries.py, summaries.py), the loaded Report (loader.py, report.py,
launches.py), the GPU operations streamed in time order (operations.py, compressed.py),
and what the readers share (chunks.py, cuda_api.py, json_input.py, redact.py). Imports
common/ and instrument/schema.py only."""
