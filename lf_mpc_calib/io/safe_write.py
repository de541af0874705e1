"""
Atomic file writes: every result is written under a temporary name in its own folder and moved
over the target with :func:`os.replace`, so a crash or a full disk mid-write leaves the
previous file intact and no partial file behind.
"""

from contextlib import contextmanager
import os
from pathlib import Path
import tempfile


@contextmanager
def atomic_path(path):
    """
    Yield a temporary path beside ``path`` (same suffix, so writers that choose the format by
    suffix still work); when the block ends without an exception it replaces ``path``,
    otherwise it is removed and ``path`` is left as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix=path.suffix
                               or '.tmp')
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def atomic_open(path, mode='w', **kwargs):
    """``open`` for writing through :func:`atomic_path` (text or binary by ``mode``)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f


def write_text(path, text):
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, 'w') as f:
        f.write(text)
