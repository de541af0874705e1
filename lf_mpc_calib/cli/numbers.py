"""
Numbers from the command line, range-checked where they enter.

Each function returns an argparse ``type=`` callable: it turns the text into an int or float and
refuses, naming the range and what arrived, a value outside it, a non-finite float or a digit
string too long to be a count.  ``counts`` parses the lists ``bench`` sweeps ('2-8', '3,5').
"""

import argparse
import math

_MAX_DIGITS = 20        # no count or seed of this tool needs more


def _describe(low, high, low_open):
    if low is not None and high is not None:
        return f'from {low} to {high}' if not low_open else f'above {low} and at most {high}'
    if low is not None:
        return f'above {low}' if low_open else f'at least {low}'
    return f'at most {high}' if high is not None else 'finite'


def integer(low=None, high=None):
    """Type for an integer in [low, high] (either bound may be None)."""
    def parse(text):
        digits = text.strip().lstrip('+-')
        if not digits.isdigit() or len(digits) > _MAX_DIGITS:
            raise argparse.ArgumentTypeError(
                f'expected an integer {_describe(low, high, False)}, got {text[:40]!r}')
        value = int(text)
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f'expected an integer {_describe(low, high, False)}, got {value}')
        return value
    return parse


def real(low=None, high=None, low_open=False):
    """Type for a finite float in [low, high], or (low, high] with ``low_open``."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and value > high
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(
                f'expected a number {_describe(low, high, low_open)}, got {text[:40]!r}')
        return value
    return parse


def counts(low, high):
    """Type for '2-8' -> (2, ..., 8) or '3,5' -> (3, 5), every count in [low, high]."""
    one = integer(low, high)

    def parse(text):
        out = []
        for part in (p.strip() for p in text.split(',')):
            if not part:
                continue
            first, sep, last = part.partition('-')
            if not sep:
                out.append(one(part))
                continue
            a, b = one(first), one(last)
            if a > b:
                raise argparse.ArgumentTypeError(
                    f'expected a rising range like {b}-{a}, got {part!r}')
            out.extend(range(a, b + 1))
        if not out:
            raise argparse.ArgumentTypeError(f'expected counts like 2-8 or 3,5, got {text!r}')
        return tuple(out)
    return parse


def reals(low=None, high=None, low_open=False, length=None):
    """Type for 'a,b,c' -> a tuple of floats each in range (and ``length`` of them if given)."""
    one = real(low, high, low_open)

    def parse(text):
        out = tuple(one(p) for p in text.split(',') if p.strip())
        if not out or (length is not None and len(out) != length):
            want = f'{length} numbers' if length else 'numbers'
            raise argparse.ArgumentTypeError(f'expected {want} separated by commas, got {text!r}')
        return out
    return parse


SEED = integer(0, 2 ** 63 - 1)
