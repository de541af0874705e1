"""
Every file the package writes goes through a temporary name and ``os.replace``: a crash, a
full disk or an error midway leaves the previous file as it was and no temporary behind.
The path must be a regular file or a new name (:func:`lf_mpc_calib.io.file_checks.check_output`:
a device, FIFO, socket or folder there is refused, InvalidInputError, before anything is
written; moving the temporary file over ``/dev/null`` would replace the device).

    write_atomically(path, write) -> path: write(temporary_path), then move it onto path
    open_atomically(path, mode='w', **open_kwargs): the same as a ``with`` block
    write_text_atomically(path, text) -> path
    make_partial_folder(parent, name) -> a new hidden folder to fill and rename into place
    remove_partials(folder, prefix='.') -> removed paths: the hidden temporaries a killed
        process left (files and folders whose name starts with ``prefix`` and holds
        ``.partial``)
"""

import contextlib
import os
from pathlib import Path

from lf_mpc_calib.io.file_checks import check_output


def temporary_name(path):
    """A hidden name beside ``path`` ending in the same suffix (writers choose the format by
    it), unique to this call: ``.<stem>.<random>.partial<suffix>``."""
    path = Path(path)
    return path.with_name(f'.{path.stem}.{os.urandom(4).hex()}.partial{path.suffix}')


def make_partial_folder(parent, name):
    """
    Make and return a new hidden folder ``parent/.<name>.<random>.partial`` (for a folder
    written whole and then renamed into place; :func:`remove_partials` finds what a killed
    writer left).

    Its mode follows the umask like every folder ``mkdir`` makes (``tempfile.mkdtemp`` makes
    0700 whatever the umask, and a save renamed from it stayed unreadable to the group).
    """
    for _ in range(100):
        path = Path(parent) / f'.{name}.{os.urandom(4).hex()}.partial'
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f'no free temporary folder name for {name!r} in {parent}')


def write_atomically(path, write):
    """Call ``write(temporary_path)``, then replace ``path`` with the result. On any error
    (raised by ``write`` or by the file system) the temporary file is removed, ``path`` is left
    as it was, and the error goes on. Returns ``path`` (a Path)."""
    path = Path(path)
    with _replacing(path) as tmp:
        write(tmp)
    return path


@contextlib.contextmanager
def _replacing(path):
    """``with _replacing(path) as tmp:`` the block writes ``tmp`` (a temporary name beside
    ``path``), which then replaces ``path``; on any error ``tmp`` is removed, ``path`` is left
    as it was and the error goes on (an OSError naming ``path``: :func:`_naming`)."""
    check_output(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        named = _naming(exc, path)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if named is exc:
            raise
        raise named from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _naming(exc, path):
    """
    The OSError ``exc`` met while writing ``path`` through its temporary name, as one naming
    ``path`` (not the hidden temporary) and its reason; a writer that gives none (NumPy's
    ``np.save``: '11400 requested and 11232 written') on a full file system gets ENOSPC, found
    before the temporary is removed. ``exc`` itself when there is nothing to add.
    """
    import errno
    code, reason = exc.errno, exc.strerror
    if code is None:
        with contextlib.suppress(OSError):
            if os.statvfs(path.parent).f_bavail == 0:
                code, reason = errno.ENOSPC, os.strerror(errno.ENOSPC)
    if code is None or (exc.filename is not None and '.partial' not in str(exc.filename)):
        return exc                      # no reason to add, or about another file
    return OSError(code, reason, str(path))


def write_text_atomically(path, text):
    """Write ``text`` to ``path`` through a temporary name; returns ``path``."""
    with open_atomically(path, 'w') as f:
        f.write(text)
    return Path(path)


@contextlib.contextmanager
def open_atomically(path, mode='w', **open_kwargs):
    """``with open_atomically(path) as f:`` writes ``f`` under a temporary name and moves it
    onto ``path`` when the block ends without an error (else ``path`` stays as it was)."""
    with _replacing(Path(path)) as tmp:
        with open(tmp, mode, **open_kwargs) as f:
            yield f


def remove_partials(folder, prefix='.'):
    """Remove what a killed writer left in ``folder``: every entry whose name starts with
    ``prefix`` (hidden by default) and holds ``.partial`` (:func:`temporary_name`, the hidden
    folders of a save or a capture being written). Returns the removed paths (sorted); a
    missing folder removes nothing. Raises OSError when one cannot be removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for entry in sorted(folder.iterdir()):
        if not (entry.name.startswith(prefix) and '.partial' in entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            import shutil  # here: every CLI run writes files, few remove folders
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry)
    return removed


__all__ = ['make_partial_folder', 'open_atomically', 'remove_partials', 'temporary_name',
           'write_atomically', 'write_text_atomically']
