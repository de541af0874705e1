"""
The package's error hierarchy.

Every error raised on purpose by lf_mpc_calib derives from :class:`LFCalibError`, so callers
(and the ROS nodes) can catch one type. Messages name what was expected and what arrived.
"""


class LFCalibError(Exception):
    """Base of every error raised by lf_mpc_calib."""


class InvalidInputError(LFCalibError, ValueError):
    """An argument has the wrong shape, type, value range, or contains NaN/inf."""


class DetectionError(LFCalibError):
    """A feature (board, corner, lenslet grid) could not be found in an image."""


class DegenerateConfigurationError(LFCalibError):
    """The data cannot determine the unknowns (e.g. all board poses parallel)."""


class ConvergenceError(LFCalibError):
    """An iterative solver did not converge."""


class UsageError(LFCalibError, ValueError):
    """A command asks for what cannot be done as asked, found before any work: an output that
    names one of its inputs, an output location that cannot be written (the CLI exits 2)."""


class CalibrationFileError(LFCalibError, ValueError):
    """A calibration file is missing a key, has another format version, or is malformed."""


def shorten(text, limit=120):
    """``text`` as a string of at most ``limit`` characters (an error must not echo a 25 MB
    value into a log): the start, an ellipsis and how many characters were left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = max(limit - 30, 10)
    return f'{text[:keep]}... ({len(text) - keep} more characters)'


def check_memory(nbytes, what):
    """
    Refuse (InvalidInputError) an allocation of ``nbytes`` for ``what`` larger than half of the
    machine's physical memory (os.sysconf), naming both figures; a no-op where unknown.
    """
    import os
    try:
        total = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    except (ValueError, OSError, AttributeError):
        return
    if nbytes > total / 2:
        raise InvalidInputError(f'{what} would need {nbytes / 2**30:.3g} GiB, more than half '
                                f'of this machine\'s {total / 2**30:.3g} GiB of memory')
