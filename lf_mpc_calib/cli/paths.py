"""
Input and output paths of a subcommand, checked before any work: no output may resolve to an
input (through links or ``..``; inside an input folder, no output may replace one of its
files), and every output location must be writable (a file where a file is expected, a folder
where a folder is, its parent creatable). A refusal is an InvalidInputError (exit 2).
"""

import os
from pathlib import Path

from lf_mpc_calib.errors import LFCalibError

INPUT_DESTS = ('observations', 'dataset', 'white', 'raw', 'grid', 'calibration', 'truth',
               'robot_poses', 'poses_file')
OUTPUT_DESTS = ('output', 'report', 'plot', 'centres', 'png', 'ply', 'save_observations')
FOLDER_OUTPUTS = {'report': None, 'output': ('decode', 'simulate', 'demo')}
"""Outputs that are folders: every subcommand's --report, and -o of these subcommands."""


class PathConflictError(LFCalibError):
    """An output names an input, or an output location is unusable (exit 2: a usage error)."""


def _paths(args, dests):
    return [(d, Path(v)) for d in dests for v in [getattr(args, d, None)]
            if isinstance(v, (str, os.PathLike))]


def _same(a, b):
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path, folder):
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, top]) == top and real != top


def _option(dest):
    if dest in ('raw', 'observations', 'dataset'):
        return dest.upper()
    return '-o' if dest == 'output' else '--' + dest.replace('_', '-')


def is_folder_output(command, dest):
    """Whether ``dest`` of ``command`` names a folder (else a file)."""
    users = FOLDER_OUTPUTS.get(dest, ())
    return dest in FOLDER_OUTPUTS and (users is None or command in users)


def output_files(args):
    """[(dest, Path)] of every output the arguments name, depth's preview PNG included."""
    out = _paths(args, OUTPUT_DESTS)
    if getattr(args, 'command', None) == 'depth' and getattr(args, 'png', None):
        png = Path(args.png)
        out.append(('png', png.with_name(png.stem + '_preview.png')))
    return out


def check_paths(args):
    """Refuse (PathConflictError) an output that is an input or cannot be written."""
    command = getattr(args, 'command', '')
    inputs = [(d, p) for d, p in _paths(args, INPUT_DESTS) if p.exists()]
    outputs = output_files(args)
    for dest, out in outputs:
        for idest, inp in inputs:
            clash = _same(out, inp)
            if not clash and inp.is_dir() and _inside(out, inp):
                clash = out.exists() or is_folder_output(command, dest)
            if not clash and is_folder_output(command, dest) and out.exists() and \
                    inp.is_file() and _inside(inp, out):
                clash = True
            if clash:
                raise PathConflictError(
                    f'{_option(dest)} {out} would overwrite the input {_option(idest)} '
                    f'{inp}; choose another output path')
        _check_location(command, dest, out)
    seen = {}
    for dest, out in outputs:
        key = os.path.realpath(out)
        if key in seen:
            raise PathConflictError(f'{_option(dest)} {out} and {_option(seen[key])} name the '
                                    'same file; give each output its own path')
        seen[key] = dest


def _check_location(command, dest, out):
    folder = is_folder_output(command, dest)
    if folder and out.exists() and not out.is_dir():
        raise PathConflictError(f'{_option(dest)} {out} must be a folder, but it is an '
                                'existing file')
    if not folder and out.is_dir():
        raise PathConflictError(f'{_option(dest)} {out} must be a file, but it is an '
                                'existing folder')
    parent = out if folder and out.is_dir() else out.parent
    probe = Path(os.path.abspath(parent))
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise PathConflictError(f'{_option(dest)} {out}: its folder cannot be created, '
                                f'{probe} is a file')
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PathConflictError(f'{_option(dest)} {out}: the folder {probe} is not writable')
    if out.exists() and not folder and not os.access(out, os.W_OK) and \
            not os.access(out.parent, os.W_OK):
        raise PathConflictError(f'{_option(dest)} {out} is not writable')
