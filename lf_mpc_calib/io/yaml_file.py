"""
Reading YAML from files and strings safely: every YAML reader of the package goes through here.

yaml.safe_load alone builds no objects but still accepts an alias bomb (a few hundred bytes
whose aliases expand to billions of nodes: an error message or a log line that prints the value
then writes megabytes) and files of any size. Here: files over MAX_BYTES, non-UTF-8 bytes,
syntax errors and documents expanding to more than MAX_NODES nodes (aliases counted each time
they are used) raise InvalidInputError naming the file, with the parser's message shortened.
"""

from pathlib import Path

from lf_mpc_calib.errors import InvalidInputError, shorten

MAX_BYTES = 8 * 1024 * 1024
"""Largest YAML file read: 8 MiB, a few seconds of parsing (libyaml parses and Python builds
about 1 MB/s; a 64 MiB manifest of 10^6 frames took minutes). A calibration file is a few kB,
a 1000-frame session manifest with checksums about 0.1 MB."""
MAX_NODES = 2_000_000


def read_yaml(path, what='YAML file'):
    """The document in the YAML file ``path``; ``what`` names it in errors ('manifest', ...)."""
    return load_yaml(read_text(path, what), f'{what} {path}')


def read_text(path, what='YAML file'):
    """The UTF-8 text of a small regular file ``path`` (at most MAX_BYTES), else
    InvalidInputError saying why not (missing, a folder, a device or FIFO, too large, binary)
    with ``what`` and the path."""
    from lf_mpc_calib.io.file_checks import read_bytes
    path = Path(path)
    data = read_bytes(path, what, MAX_BYTES)     # a device, FIFO, folder or larger: refused
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f'cannot read {what} {path}: not UTF-8 text (byte {exc.start}); '
                                f'expected a YAML file, got a binary file') from None


def load_yaml(text, what='YAML text'):
    """The document in the YAML string ``text``; errors start with ``what``."""
    import yaml
    if '\0' in text:
        raise InvalidInputError(f'{what}: holds NUL bytes; expected YAML text, got binary data')
    try:
        doc = yaml.load(text, Loader=_loader())
    except _DuplicateKey as exc:
        raise InvalidInputError(f'{what}: {exc}') from None
    except yaml.YAMLError as exc:
        raise InvalidInputError(f'{what}: not valid YAML ({shorten(exc, 300)})') from None
    except RecursionError:
        raise InvalidInputError(f'{what}: nested too deeply to be read as YAML') from None
    except ValueError as exc:       # an integer of over 4300 digits (int_max_str_digits)
        raise InvalidInputError(f'{what}: a value cannot be read ({shorten(exc, 200)}); '
                                'expected numbers of ordinary size') from None
    nodes = _count_nodes(doc, MAX_NODES)
    if nodes > MAX_NODES:
        raise InvalidInputError(
            f'{what}: expands to more than {MAX_NODES} values (aliases counted each time they '
            f'are used: an alias bomb?); expected a small document')
    return doc


class _DuplicateKey(Exception):
    """A mapping names one key twice (yaml.safe_load keeps the last without a word)."""


_LOADER = []


def _loader():
    """yaml.SafeLoader that refuses a key given twice in one mapping (a merge key's ``<<``
    entries may still be overridden, as YAML means them to be)."""
    if _LOADER:
        return _LOADER[0]
    import yaml

    base = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)      # libyaml's parser, 3-10 x faster

    class UniqueKeyLoader(base):
        pass

    def construct_mapping(loader, node, deep=False):
        keys = [(loader.construct_object(k, deep=True), k.start_mark.line + 1)
                for k, _ in node.value if k.tag != 'tag:yaml.org,2002:merge']
        lines = {}
        for key, line in keys:
            try:
                if key in lines:
                    raise _DuplicateKey(f'the key {shorten(repr(key), 60)} appears twice (lines '
                                        f'{lines[key]} and {line}); expected each key once')
                lines[key] = line
            except TypeError:
                continue
        return base.construct_mapping(loader, node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                    construct_mapping)
    _LOADER.append(UniqueKeyLoader)
    return UniqueKeyLoader


def _count_nodes(doc, limit):
    """Nodes of ``doc`` with shared (aliased) parts counted at every use, stopping past
    ``limit``."""
    count, stack = 0, [doc]
    while stack and count <= limit:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return count
