"""
The last few results of a costly pure computation, by key (least recently used dropped first),
shared by threads: the simulated camera's whites (:mod:`lf_mpc_calib.simulation.render`) and
the grids fitted to whites (:mod:`lf_mpc_calib.lenslet.estimate`).

    kept = KeptResults()
    value = kept.get(key, compute, limit)   # compute() when key is not kept; keeps <= limit
    kept.clear(); len(kept)
"""

import threading
from collections import OrderedDict

_MISSING = object()


class KeptResults:
    """Results by key, the most recently used last; compute() runs outside the lock (two
    threads asking for one new key may both compute it, and keep one)."""

    def __init__(self):
        self._items = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, compute, limit):
        """The result kept under ``key``, else compute()'s, kept with at most ``limit``
        results (the least recently used dropped)."""
        with self._lock:
            value = self._items.pop(key, _MISSING)
        if value is _MISSING:
            value = compute()
        with self._lock:
            self._items[key] = value
            while len(self._items) > limit:
                self._items.popitem(last=False)
        return value

    def clear(self):
        with self._lock:
            self._items.clear()

    def __len__(self):
        return len(self._items)
