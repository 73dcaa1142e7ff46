"""Run first by every Python process the profiled program starts (multiprocessing's spawn
and forkserver workers, torchrun's ranks, `subprocess.run([sys.executable, ...])`): under
`nsyswrap run` their PYTHONPATH begins with this folder (set by nsyswrap/instrument/runner.py), so
each records its own CUDA-event timings as the program's first process does
(nsyswrap/instrument/event_hooks.py, loaded by path: nothing of nsyswrap is imported). Then the
sitecustomize this one hides, if the environment has one, runs as it would have.

Standard library only; this folder holds nothing else, and leaves sys.path as it found it.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _record() -> None:
    if os.environ.get("NSYSWRAP_USER_EVENTS", "1") == "0":
        return
    path = os.path.join(os.path.dirname(_HERE), "event_hooks.py")
    spec = importlib.util.spec_from_file_location("_nsyswrap_user_events", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.install()


def _outside(entry: str) -> bool:
    return os.path.abspath(entry or os.curdir) != _HERE


def _chain() -> None:
    """The environment's own sitecustomize, found on the path past this folder."""
    sys.path[:] = [p for p in sys.path if _outside(p)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _record()
except Exception as e:  # never keep the program from starting
    sys.stderr.write(f"nsyswrap: this process's CUDA-event timings are not recorded: "
                     f"{type(e).__name__}: {e}\n")
_chain()
