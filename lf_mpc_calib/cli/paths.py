"""
Checks of a command's output paths, made before any work: no output may overwrite an input
(the same file through links or ``..`` included, or a file of an input data set folder), no
folder output may hold an input file (what is written into it could replace it), an output
whose format follows its suffix must have one its writer knows, and every output location must
be writable. A failed check raises UsageError (exit 2) naming the
paths.

    check_outputs(command, args): the parsed arguments of ``lf-mpc-calib COMMAND``
    dataset_output(DIR, overwrite): ``simulate``'s and ``plan``'s data set folder, refused
        when it is not empty unless ``--overwrite``, replaced whole (no stale frames)
    files_output(DIR): a folder of files written whole or not at all (``decode``'s views)
"""

import contextlib
import importlib
import os
from pathlib import Path
import re
import shutil

from lf_mpc_calib.errors import UsageError
from lf_mpc_calib.io.file_checks import output_problem

INPUT_DESTS = ('observations', 'dataset', 'white', 'raw', 'grid', 'calibration', 'truth',
               'robot_poses', 'poses_file', 'dark', 'check')
"""argparse destinations that name the files and folders a subcommand reads (a new input
option is protected once its destination is here; test_hostile_round4 finds one that is not)."""
OUTPUT_DESTS = ('output', 'report', 'plot', 'centres', 'png', 'ply', 'save_observations')
"""argparse destinations that name what a subcommand writes."""

IMAGE_SUFFIXES = ('.png', '.tif', '.tiff')
PLOT_SUFFIXES = ('.png', '.pdf', '.svg', '.svgz', '.eps', '.ps', '.jpg', '.jpeg', '.tif', '.tiff',
                 '.webp', '.pgf')
OUTPUT_SUFFIXES = {('depth', 'output'): ('.npy',), ('depth', 'png'): IMAGE_SUFFIXES,
                   ('refocus', 'output'): IMAGE_SUFFIXES, ('grid', 'plot'): PLOT_SUFFIXES}
"""(command, destination) of the outputs whose writer picks the format by the name's suffix:
the suffixes it can write, checked before any work (not once the result is ready)."""

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
        if isinstance(value, (str, os.PathLike)):
            folder = dest == 'report' or (command, dest) in FOLDER_OUTPUTS
            label = f'--{dest.replace("_", "-")}'
            if not str(value):              # before Path(''), which is '.'
                raise UsageError(f'{label}: {output_problem(value, folder)}')
            found.append((label, Path(value), folder))
    return found + [(label, Path(p), False) for label, p in _derived_outputs(command, args)]


def _inputs(command, args):
    """
    (label, path) of every existing file or folder the command reads: its input arguments,
    the files its module's ``implied_inputs(args)`` names (``depth``'s white.png beside the
    frame), and those a data set folder's manifest names (outside the folder too). Refuses
    (UsageError) an input that is a device, FIFO or socket: a regular file or folder is read.
    """
    from lf_mpc_calib.io.file_checks import file_kind
    from lf_mpc_calib.io.raw_dataset import manifest_files
    named = []
    for dest in INPUT_DESTS:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, (str, os.PathLike)) and str(v):
                named.append((dest.replace('_', '-'), Path(v)))
    try:
        module = importlib.import_module(f'lf_mpc_calib.cli.{command.replace("-", "_")}')
    except ImportError:
        module = None
    named += getattr(module, 'implied_inputs', lambda _: [])(args)
    found = []
    for label, path in named:
        kind = file_kind(path)
        if kind is None:
            continue
        if kind not in ('a regular file', 'a folder'):
            raise UsageError(f'{label} {path} is {kind}; expected a regular file (or a data '
                             'set folder)')
        found.append((label, path))
        if kind == 'a folder':
            found += [(f'{p.name} named by the manifest of {label} {path}', p)
                      for p in manifest_files(path) if file_kind(p) == 'a regular file']
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


def _held_by(out, src):
    """Whether the input file ``src`` lies directly in the folder output ``out``, where the
    files the command writes (decode's mosaic.png and view_*.png, a report's summary.txt, a
    data set's frames) could take its place."""
    return src.is_file() and os.path.realpath(src.parent) == os.path.realpath(out)


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
    outputs = _outputs(command, args)
    inputs = _inputs(command, args)
    for label, out, folder in outputs:
        for in_label, src in inputs:
            if _overwrites(out, folder, src):
                raise UsageError(f'{label} {out} would overwrite the input {in_label} {src}; '
                                 'write the result elsewhere')
            if folder and _held_by(out, src):
                raise UsageError(f'{label} {out} holds the input {in_label} {src}, which the '
                                 'files written into it could replace; expected a folder '
                                 'without the inputs: write the result into another folder')
    for (label_a, a, _), (label_b, b, _) in ((x, y) for i, x in enumerate(outputs)
                                             for y in outputs[i + 1:]):
        if os.path.realpath(a) == os.path.realpath(b):
            raise UsageError(f'{label_a} and {label_b} name the same file {a}: give each its '
                             'own path')
    for label, out, folder in outputs:
        problem = output_problem(out, folder)
        if problem:
            raise UsageError(f'{label}: {problem}')
        base = _first_existing(out if folder else out.parent)
        if not base.is_dir():
            raise UsageError(f'{label} {out}: {base} is a file, so the folder cannot be made')
        if not os.access(base, os.W_OK | os.X_OK):
            raise UsageError(f'{label} {out}: {base} is not writable')
        if out.exists() and not folder and not os.access(out, os.W_OK) and \
                not os.access(out.parent, os.W_OK):
            raise UsageError(f'{label} {out} is not writable')
    _check_suffixes(command, args)


def _check_suffixes(command, args):
    """UsageError for an output whose writer picks the format by a suffix it does not know
    (OUTPUT_SUFFIXES)."""
    for (cmd, dest), suffixes in OUTPUT_SUFFIXES.items():
        value = getattr(args, dest, None) if cmd == command else None
        if isinstance(value, (str, os.PathLike)) and Path(value).suffix.lower() not in suffixes:
            raise UsageError(f'--{dest} {value}: expected a name ending in '
                             f'{", ".join(suffixes)} (the format follows it), got '
                             f'{Path(value).suffix or "no suffix"}')


def add_dataset_output_arguments(parser):
    """-o/--output DIR and --overwrite of the commands that write a data set (simulate, plan);
    :func:`check_dataset_output` applies them."""
    parser.add_argument('-o', '--output', required=True, metavar='DIR',
                        help='dataset folder (new or empty; see --overwrite)')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the data set DIR holds: its manifest, white image, dark '
                             'frame, frames and ground truth are removed once the new one is '
                             'written (a folder that holds other files is still refused)')


DATASET_FILE = re.compile(r'(?:manifest|ground_truth)\.yaml|(?:white|dark)\.(?:png|npy|tiff?)|'
                          r'(?:frame|depth)_\d+\.(?:png|npy|tiff?)|\..*\.partial.*')
"""Names of the entries a data set folder written by ``simulate`` or ``plan`` holds (hidden
``.partial`` ones: what a run cut off left)."""


def _describe(entries):
    """What a folder holds, in words: 'manifest.yaml, white.png, 12 frames, notes.txt'."""
    frames = [e for e in entries if re.fullmatch(r'frame_\d+\.\w+', e)]
    depths = [e for e in entries if re.fullmatch(r'depth_\d+\.\w+', e)]
    rest = [e for e in entries if e not in frames and e not in depths]
    words = rest[:6] + ([f'{len(rest) - 6} more'] if len(rest) > 6 else [])
    if frames:
        span = frames[0] if len(frames) == 1 else f'{frames[0]}..{frames[-1]}'
        words.append(f'{len(frames)} frame{"s" * (len(frames) != 1)} ({span})')
    words += [f'{len(depths)} depth truth file{"s" * (len(depths) != 1)}'] if depths else []
    return ', '.join(words)


def check_dataset_output(folder, overwrite):
    """
    Refuse (UsageError) to write a data set into ``folder`` when it is not empty, unless
    ``overwrite``; with it, refuse still when the folder holds anything a data set does not
    (DATASET_FILE): ``--overwrite`` replaces a data set, never a user's other files. Returns
    the names of the entries the folder holds (sorted; none when it is absent).
    """
    folder = Path(folder)
    entries = sorted(os.listdir(folder)) if folder.is_dir() else []
    if entries and not overwrite:
        what = ('a data set' if (folder / 'manifest.yaml').exists() else 'files')
        raise UsageError(f'-o {folder} is not empty: it holds {what} ({_describe(entries)}); '
                         'pass --overwrite to replace that data set, or choose another folder')
    foreign = [e for e in entries if not DATASET_FILE.fullmatch(e)]
    if foreign:
        raise UsageError(f'-o {folder} holds files that are not part of a data set '
                         f'({_describe(foreign)}); --overwrite replaces only a data set\'s own '
                         'files (manifest, white image, frames, ground truth): move those away '
                         'or choose another folder')
    return entries


def dataset_output(folder, overwrite):
    """
    ``with dataset_output(DIR, overwrite) as tmp:`` write a new data set into ``tmp`` (a
    hidden folder inside DIR); when the block ends without an error the new files take the
    place of whatever data set DIR held (check_dataset_output first), the old manifest removed
    first and the new one moved in last, so that no frame, depth truth or ground truth of the
    earlier data set is left beside the new one. An error while the data set is written
    leaves DIR as it was (a DIR this call made is removed again) and goes on.
    """
    folder = Path(folder)
    old = check_dataset_output(folder, overwrite)
    return _staged_output(folder, 'dataset', lambda tmp: _replace_dataset(tmp, folder, old))


def files_output(folder):
    """
    ``with files_output(DIR) as tmp:`` write a command's files into ``tmp`` (a hidden folder
    inside DIR); when the block ends without an error they are moved into DIR, replacing files
    of the same names and leaving the others. An error, a full disk or an interruption midway
    leaves DIR as it was, with none of the new files (a DIR this call made is removed again):
    never a part of the set, such as some of decode's views.
    """
    folder = Path(folder)
    return _staged_output(folder, 'output', lambda tmp: _move_into(tmp, folder))


@contextlib.contextmanager
def _staged_output(folder, label, publish):
    """
    Yield a hidden ``label`` folder made inside ``folder`` (made too when absent); after the
    block, ``publish(tmp)`` moves its files into ``folder``. An error in either removes the
    hidden folder (and a ``folder`` made here) and goes on.
    """
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    from lf_mpc_calib.io.atomic import make_partial_folder
    tmp = make_partial_folder(folder, label)
    try:
        yield tmp
        publish(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)


def _move_into(tmp, folder):
    """Move every entry of ``tmp`` into ``folder``, replacing those of the same names."""
    for name in sorted(os.listdir(tmp)):
        os.replace(tmp / name, folder / name)


def _replace_dataset(tmp, folder, old):
    """Move the data set in ``tmp`` into ``folder`` in place of the one whose entries ``old``
    (names) it held: its manifest removed first, the new one moved in last, then every old
    entry the new set does not have removed."""
    new = sorted(os.listdir(tmp))
    manifest = [n for n in new if n == 'manifest.yaml']
    if (folder / 'manifest.yaml').exists():
        os.unlink(folder / 'manifest.yaml')     # no manifest naming a mixed set
    for name in [n for n in new if n not in manifest] + manifest:
        os.replace(tmp / name, folder / name)
    for name in old:
        path = folder / name
        if name not in new and path != tmp and (path.exists() or path.is_symlink()):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
