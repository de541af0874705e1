"""A raw frame or white image read with its dark frame subtracted (data sets with ``dark``)."""

from pathlib import Path

import numpy as np

from lf_mpc_calib.lenslet.dark_frame import check_dark, minus_dark


class DarkCorrected:
    """
    An image file read less a dark frame: ``load()`` gives ``max(image - dark, 0)`` in the
    image's own dtype (so every reader scales it as it scales the file). ``name`` and
    ``os.fspath`` are the file's, so labels and reports name the file itself.
    """

    def __init__(self, path, dark):
        self.path = Path(path)
        self.dark = np.asarray(dark)

    @property
    def name(self):
        return self.path.name

    def __fspath__(self):
        return str(self.path)

    def __str__(self):
        return str(self.path)

    def load(self):
        """The image (H, W) less the dark frame, clipped at 0, in the image's dtype."""
        from lf_mpc_calib.io.images import read_image
        return minus_dark(read_image(self.path), self.dark, str(self.path))


def dark_for(white, dark_path):
    """The dark frame (H, W) of ``dark_path`` after checking it against the white image."""
    from lf_mpc_calib.io.images import read_image
    dark = np.asarray(read_image(dark_path))
    check_dark(read_image(white), dark, dark_name=f'dark frame {Path(dark_path).name}')
    return dark
