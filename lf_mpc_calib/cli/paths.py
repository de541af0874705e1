"""
Checks of a command's output paths, made before any work: no output may overwrite an input
(the same file through links or ``..`` included, or a file of an input data set folder), and
every output location must be writable. A failed check raises UsageError (exit 2) naming the
paths.

    check_outputs(command, args): the parsed arguments of ``lf-mpc-calib COMMAND``
"""

import os
from pathlib import Path

from lf_mpc_calib.errors import UsageError

INPUT_DESTS = ('observations', 'dataset', 'white', 'raw', 'grid', 'calibration', 'truth',
               'robot_poses', 'poses_file')
"""argparse destinations that name the files and folders a subcommand reads."""
OUTPUT_DESTS = ('output', 'report', 'plot', 'centres', 'png', 'ply', 'save_observations')
"""argparse destinations that name what a subcommand writes."""

FOLDER_OUTPUTS = {('decode', 'output'), ('simulate', 'output'), ('demo', 'output'),
                  ('bench', 'output'), ('plan', 'output')}
"""(command, destination) of the outputs that are folders (``report`` always is one)."""


def _derived_outputs(command, args):
    """Files a command writes beside its named outputs: (label, path)."""
    derived = []
    output = getattr(args, 'output', None)
    if command == 'calibrate-raw' and output:
        from lf_mpc_calib.io.observation_table import observations_path
        derived.append(('the observation table beside -o', observations_path(output)))
    if command == 'depth' and getattr(args, 'png', None):
        png = Path(args.png)
        derived.append(('the preview beside --png', png.with_name(png.stem + '_preview.png')))
    return derived


def _outputs(command, args):
    """(label, path, is_folder) of every output named on the command line."""
    found = []
    for dest in OUTPUT_DESTS:
        value = getattr(args, dest, None)
        if isinstance(value, (str, os.PathLike)) and str(value):
            folder = dest == 'report' or (command, dest) in FOLDER_OUTPUTS
            found.append((f'--{dest.replace("_", "-")}', Path(value), folder))
    return found + [(label, Path(p), False) for label, p in _derived_outputs(command, args)]


def _inputs(args):
    """(label, path) of every input argument naming an existing file or folder."""
    found = []
    for dest in INPUT_DESTS:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, (str, os.PathLike)) and str(v) and os.path.exists(v):
                found.append((dest.replace('_', '-'), Path(v)))
    return found


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _inside(path, folder):
    """Whether ``path`` resolves to somewhere inside ``folder`` (or is it)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _overwrites(out, folder, src):
    """Whether writing the output ``out`` (a folder when ``folder``) destroys the input
    ``src``: the same path (through links or ``..``), or an existing file of an input folder
    (a data set's frame, white image, manifest) written over by a file output."""
    if _same(out, src):
        return True
    return src.is_dir() and not folder and out.is_file() and _inside(out, src)


def _first_existing(path):
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_outputs(command, args):
    """
    Refuse (UsageError, before any work) an output of ``args`` that would overwrite an input:
    the same file, an input folder itself, or an existing file inside an input folder (a data
    set's frames, white image, manifest); and an output whose location cannot be written (a
    folder where a file is meant, a file where a folder is meant, no write permission).
    """
    inputs = _inputs(args)
    outputs = _outputs(command, args)
    for label, out, folder in outputs:
        for in_label, src in inputs:
            if _overwrites(out, folder, src):
                raise UsageError(f'{label} {out} would overwrite the input {in_label} {src}; '
                                 'write the result elsewhere')
    for (label_a, a, _), (label_b, b, _) in ((x, y) for i, x in enumerate(outputs)
                                             for y in outputs[i + 1:]):
        if os.path.realpath(a) == os.path.realpath(b):
            raise UsageError(f'{label_a} and {label_b} name the same file {a}: give each its '
                             'own path')
    for label, out, folder in outputs:
        if folder and out.exists() and not out.is_dir():
            raise UsageError(f'{label} {out} is a file; a folder is expected there')
        if not folder and out.is_dir():
            raise UsageError(f'{label} {out} is an existing folder; a file name is expected '
                             'there')
        base = _first_existing(out if folder else out.parent)
        if not base.is_dir():
            raise UsageError(f'{label} {out}: {base} is a file, so the folder cannot be made')
        if not os.access(base, os.W_OK | os.X_OK):
            raise UsageError(f'{label} {out}: {base} is not writable')
        if out.exists() and not folder and not os.access(out, os.W_OK) and \
                not os.access(out.parent, os.W_OK):
            raise UsageError(f'{label} {out} is not writable')
