"""
Warnings about a raw frame that does not look like a frame of the white image's camera.

Two mistakes decode without an error and give nonsense: the white image given as the frame
(or a frame of a uniform wall: no texture to measure), and a frame turned by 90 degrees or
transposed against the white image (a square sensor keeps its shape). :func:`frame_warnings`
names the evidence: the shapes, the correlation of the frame with the white image and with the
white image transposed, and how much frame / white varies over the white's bright pixels.
"""

import numpy as np

NEARLY_WHITE_CORRELATION = 0.97
"""A frame correlating this much with the white image ..."""
NEARLY_WHITE_VARIATION = 0.05
"""... whose ratio to the white varies by less than this (std / mean) is (nearly) the white."""
TRANSPOSED_MARGIN = 0.2
"""A frame correlating this much better with the white transposed than with the white."""
TRANSPOSED_LEAST = 0.3
"""... and at least this much with the white transposed, is transposed."""
SAMPLE_PIXELS = 250_000
"""At most about this many pixels are compared (a regular subsample)."""


def _grey(image, step):
    """Every ``step``-th pixel of each ``step``-th row, grey, float64 (subsampled first)."""
    a = np.asarray(image)[::step, ::step].astype(np.float64)
    return a.mean(axis=2) if a.ndim == 3 else a


def _correlation(a, b):
    a = a - a.mean()
    b = b - b.mean()
    den = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
    return float(np.dot(a, b)) / den if den > 0 else 0.0


def frame_warnings(raw, white, *, sample_pixels=SAMPLE_PIXELS):
    """
    Messages (list of str, empty when none) saying why ``raw`` (H, W[, C]) looks like the
    white image (H, W[, C]) itself, or like a frame transposed against it; about
    ``sample_pixels`` pixels compared (the same regular subsample of both).
    """
    raw, white = np.asarray(raw), np.asarray(white)
    if raw.ndim not in (2, 3) or white.ndim not in (2, 3):
        return []
    if raw.shape[:2] != white.shape[:2]:
        if raw.shape[:2] == white.shape[1::-1]:
            return [f'the frame is {raw.shape[1]}x{raw.shape[0]} px but the white image '
                    f'{white.shape[1]}x{white.shape[0]}: width and height swapped (is the frame '
                    'transposed or turned by 90 degrees?)']
        return []
    step = max(1, int(np.sqrt(raw.shape[0] * raw.shape[1] / max(1, int(sample_pixels)))))
    raw_s, white_s = _grey(raw, step), _grey(white, step)
    r, w = raw_s.ravel(), white_s.ravel()
    with np.errstate(all='ignore'):
        corr = _correlation(r, w)
        found = []
        bright = w > 0.5 * w.max()
        if corr >= NEARLY_WHITE_CORRELATION and bright.any():
            ratio = r[bright] / w[bright]
            variation = float(ratio.std() / ratio.mean()) if ratio.mean() > 0 else np.inf
            if variation < NEARLY_WHITE_VARIATION:
                found.append(
                    f'the frame is (nearly) the white image: it correlates {corr:.3f} with it '
                    f'and frame / white varies by only {100 * variation:.2g} % over the white\'s '
                    'bright pixels (no scene to measure; is the white image given as a frame?)')
        if raw_s.shape[0] == raw_s.shape[1]:
            for name, turned in (('transposed', white.swapaxes(0, 1)),
                                 ('turned by 90 degrees', np.rot90(white, 1)),
                                 ('turned by -90 degrees', np.rot90(white, -1))):
                corr_t = _correlation(r, _grey(turned, step).ravel())
                if corr_t >= TRANSPOSED_LEAST and corr_t > corr + TRANSPOSED_MARGIN:
                    found.append(
                        f'the frame correlates {corr_t:.2f} with the white image {name} but '
                        f'{corr:.2f} with the white image: is the frame {name}?')
                    break
    return found


__all__ = ['frame_warnings']
