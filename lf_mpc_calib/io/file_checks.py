"""
What a path may be, for reading and for writing, and reads bounded by a file's size: every
reader and writer of the package goes through here (one rule, one place).

An output is a regular file (replaced through a temporary name, :mod:`lf_mpc_calib.io.atomic`)
or a new name; a device, FIFO, socket or folder there is refused: the temporary file moved over
it would replace ``/dev/null`` itself, or a FIFO a process reads. An input is a regular file;
a device or FIFO (``/dev/zero``: never ends) is refused before it is opened, and every read
stops past a stated limit, before the bytes are parsed.

    file_kind(path) -> 'a regular file', 'a folder', 'a character device', ... or None (absent)
    output_problem(path, folder=False) -> why ``path`` cannot be an output, or None (a name
        longer than MAX_NAME_BYTES included)
    check_output(path, what='output', folder=False): InvalidInputError with output_problem
    check_input_file(path, what, limit=None) -> size in bytes: a regular file of at most limit
    read_bytes(path, what, limit) -> bytes: at most ``limit`` of them, else InvalidInputError
    check_npy(path, what, limit=MAX_NPY_BYTES) -> (shape, dtype): its header, before loading
    load_npy(path, what, limit=MAX_NPY_BYTES) -> ndarray
"""

import os
from pathlib import Path
import stat

from lf_mpc_calib.errors import InvalidInputError, shorten

MAX_NPY_BYTES = 4 * 1024 ** 3
""".npy files (depth maps, captured frames): at most 4 GiB of array data (a 41 Mpx float64
depth map is 0.33 GiB)."""

MAX_NAME_BYTES = 255 - 24
"""Longest output file name, in bytes: 255 (NAME_MAX of Linux file systems) less the room the
temporary name beside it needs (``.``, ``.<8 hex>.partial``: :mod:`lf_mpc_calib.io.atomic`),
so that a name accepted before the work is one that can be written after it."""

_KINDS = ((stat.S_ISREG, 'a regular file'), (stat.S_ISDIR, 'a folder'),
          (stat.S_ISCHR, 'a character device'), (stat.S_ISBLK, 'a block device'),
          (stat.S_ISFIFO, 'a FIFO (named pipe)'), (stat.S_ISSOCK, 'a socket'))


def kind_of_mode(mode):
    """'a regular file', 'a folder', 'a character device', ... for an ``st_mode``."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return 'a special file'


def file_kind(path):
    """What ``path`` is, following links (see kind_of_mode); None when nothing is there (a
    dangling link included)."""
    try:
        return kind_of_mode(os.stat(path).st_mode)
    except (OSError, ValueError):       # absent, a file on the way, not stat-able, NUL byte
        return None


def output_problem(path, folder=False):
    """
    Why ``path`` cannot be written as an output (a folder output when ``folder``), or None.

    A file output must be a regular file (it is replaced) or a new name; a folder output an
    existing folder or a new name; neither may be the empty name.
    """
    if not str(path):
        return f'an empty name; expected {"a folder" if folder else "a file"} name'
    name = os.fsencode(Path(path).name)
    if len(name) > MAX_NAME_BYTES:
        return (f'{shorten(path, 200)}: a name of {len(name)} bytes, expected at most '
                f'{MAX_NAME_BYTES} (the file system\'s limit, less room for the temporary name '
                'it is written under)')
    kind = file_kind(path)
    if kind is None:
        return None
    if folder and kind != 'a folder':
        return f'{path} is {kind}; expected a folder or a new name'
    if not folder and kind != 'a regular file':
        what = 'an existing folder' if kind == 'a folder' else kind
        return f'{path} is {what}; expected a regular file or a new name'
    return None


def check_output(path, what='output', folder=False):
    """Raise InvalidInputError when ``path`` cannot be the output ``what`` (output_problem)."""
    problem = output_problem(path, folder)
    if problem:
        raise InvalidInputError(f'{what}: {problem}')


def check_input_file(path, what, limit=None):
    """
    The size in bytes of the input file ``path`` (``what`` names it in errors), or
    InvalidInputError when it is missing, not a regular file (a folder, a device, a FIFO) or
    larger than ``limit`` bytes (None: any size).
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise InvalidInputError(f'cannot read {what} {path}: it does not exist') from None
    except OSError as exc:
        raise InvalidInputError(f'cannot read {what} {path}: {exc.strerror or exc}') from None
    return _checked_size(path, what, st, limit)


def _checked_size(path, what, st, limit):
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInputError(f'cannot read {what} {path}: it is {kind_of_mode(st.st_mode)}, '
                                'expected a regular file')
    if limit is not None and st.st_size > limit:
        raise InvalidInputError(f'cannot read {what} {path}: {st.st_size} bytes, expected at '
                                f'most {limit} bytes')
    return st.st_size


def read_bytes(path, what, limit):
    """
    The bytes of the regular file ``path``, at most ``limit`` of them: a device, FIFO or
    folder, or a file larger than ``limit`` (checked before reading, and again while reading:
    a file that grows) raise InvalidInputError naming ``what``.
    """
    check_input_file(path, what, limit)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0))
    except OSError as exc:
        raise InvalidInputError(f'cannot read {what} {path}: {exc.strerror or exc}') from None
    with os.fdopen(fd, 'rb') as f:
        _checked_size(path, what, os.fstat(fd), limit)     # the file opened is the one checked
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InvalidInputError(f'cannot read {what} {path}: more than {limit} bytes, expected '
                                f'at most {limit} bytes')
    return data


def check_npy(path, what, limit=MAX_NPY_BYTES):
    """
    (shape, dtype) of the .npy file ``path`` from its header, checked before any array is
    allocated: a regular file, NumPy's magic, no object arrays, at most ``limit`` bytes of data,
    and as many bytes in the file as the header claims (else InvalidInputError naming ``what``).
    """
    import numpy as np
    size = check_input_file(path, what)
    fmt = np.lib.format
    with open(path, 'rb') as f:
        magic = f.read(6)
        if magic != b'\x93NUMPY':
            raise InvalidInputError(f'{what} {path}: expected a .npy file, got a file that '
                                    f'starts with {shorten(repr(magic), 40)}')
        f.seek(0)
        try:
            version = fmt.read_magic(f)
            read = {(1, 0): fmt.read_array_header_1_0,
                    (2, 0): fmt.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f'unknown .npy format version {version}')
            shape, _, dtype = read(f)
        except (ValueError, OSError, EOFError, SyntaxError) as exc:
            raise InvalidInputError(f'{what} {path}: not a readable .npy header '
                                    f'({shorten(exc, 200)})') from None
        offset = f.tell()
    if dtype.hasobject:
        raise InvalidInputError(f'{what} {path}: holds Python objects ({dtype}); expected '
                                'numbers')
    count = 1
    for n in shape:
        count *= int(n)
    nbytes = count * dtype.itemsize
    if nbytes > limit:
        raise InvalidInputError(f'{what} {path}: its header claims {shape} {dtype} '
                                f'({nbytes} bytes), expected at most {limit} bytes')
    if size - offset < nbytes:
        raise InvalidInputError(f'{what} {path}: its header claims {shape} {dtype} '
                                f'({nbytes} bytes) but the file holds {size - offset} bytes of '
                                'data (cut off?)')
    return tuple(int(n) for n in shape), dtype


def load_npy(path, what, limit=MAX_NPY_BYTES):
    """The array in the .npy file ``path``, checked by check_npy first."""
    import numpy as np
    check_npy(path, what, limit)
    try:
        return np.load(Path(path), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InvalidInputError(f'{what} {path}: cannot read it ({shorten(exc, 200)})') from None


__all__ = ['MAX_NAME_BYTES', 'MAX_NPY_BYTES', 'check_input_file', 'check_npy', 'check_output',
           'file_kind', 'kind_of_mode', 'load_npy', 'output_problem', 'read_bytes']
