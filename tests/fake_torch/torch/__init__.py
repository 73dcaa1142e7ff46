"""A stand-in for torch on machines without a GPU: just what nsyswrap's runner hooks
(tests/test_user_events.py). Event times come from the host clock."""
from . import cuda  # noqa: F401  (torch imports torch.cuda eagerly too)
