"""Running a workload under Nsight Systems, and everything around it: finding and driving
nsys (nsys.py), profiling without losing what was captured (profile.py), the workload's
own output channels and signals (launch.py, streams.py), the run's folder (run_folder.py),
`nsyswrap run` and `import` from capture to the written outputs (pipeline.py) and
`nsyswrap doctor` (doctor.py). The top floor: it may import every other folder."""
