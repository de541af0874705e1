"""
The ``lf-mpc-calib`` command.

Each subcommand lives in its own module of this package and defines
``register(subparsers)`` which adds its parser and sets ``func=run`` (a callable taking the
parsed arguments and returning an exit code). Add a module name to SUBCOMMANDS to expose it.
"""

import argparse
import importlib
import os
import sys

from lf_mpc_calib.blas_threads import prefer_one_blas_thread

prefer_one_blas_thread()      # before anything loads NumPy

from lf_mpc_calib import __version__  # noqa: E402
from lf_mpc_calib.cli.paths import check_outputs  # noqa: E402
from lf_mpc_calib.errors import LFCalibError, UsageError, shorten  # noqa: E402

SUBCOMMANDS = (
    'grid',
    'decode',
    'simulate',
    'calibrate',
    'calibrate_raw',
    'bench',
    'demo',
    'depth',
    'refocus',
    'plan',
    'import_calibration',
    'export_calibration',
    'verify',
)


def build_parser():
    """Return the top-level argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog='lf-mpc-calib',
        description='Calibrate light-field cameras with the multi-projection-center model.')
    parser.add_argument('--version', action='version', version=f'%(prog)s {__version__}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    for name in SUBCOMMANDS:
        importlib.import_module(f'lf_mpc_calib.cli.{name}').register(sub)
    return parser


def main(argv=None):
    """
    Entry point of the console script; returns the process exit code.

    Ctrl-C (SIGINT) at any moment, while the subcommands load too, ends it with 130 and no
    traceback; SIGTERM (``timeout``, ``docker stop``, systemd) ends it with 143 the same way,
    through the same clean-up (every output is written under a temporary name that an
    interruption removes, so neither leaves a partial file behind).
    """
    previous = _on_sigterm(_terminate)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    finally:
        _on_sigterm(previous)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def _on_sigterm(handler):
    """Install ``handler`` for SIGTERM (main thread only; None leaves it); returns the old."""
    import signal
    import threading
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def _main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, 'func', None):
        parser.print_help()
        return 2
    try:
        check_outputs(args.command, args)
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f'lf-mpc-calib {args.command}: error: {shorten(exc, 2000)}', file=sys.stderr)
        return 2
    except LFCalibError as exc:
        print(f'lf-mpc-calib {args.command}: error: {shorten(exc, 2000)}', file=sys.stderr)
        return 1
    except OSError as exc:          # the file system refused (permission, disk full, ...)
        where = f'{exc.filename}: ' if exc.filename else ''
        print(f'lf-mpc-calib {args.command}: error: {where}{exc.strerror or exc}',
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:        # noqa: B902 - a bug: one line, the details on request
        if os.environ.get('LF_MPC_CALIB_DEBUG'):
            raise
        print(f'lf-mpc-calib {args.command}: internal error: {type(exc).__name__}: '
              f'{shorten(exc, 500)} (please report it; LF_MPC_CALIB_DEBUG=1 shows where)',
              file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
