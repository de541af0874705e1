"""
Make the README's figure from a demo run: a crop of a raw frame (micro-images), the board's
corners found in its central view, and the board poses the calibration recovered.

    .venv/bin/lf-mpc-calib demo -o /tmp/demo
    .venv/bin/python docs/make_figures.py /tmp/demo   # writes docs/images/demo.png
"""

import sys
from pathlib import Path

import cv2
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


def main(demo_dir):
    demo_dir = Path(demo_dir)
    raw = cv2.imread(str(demo_dir / 'dataset' / 'frame_000.png'), cv2.IMREAD_UNCHANGED)
    h, w = raw.shape[:2]
    crop = raw[h // 2 - 60:h // 2 + 60, w // 2 - 90:w // 2 + 90]
    panels = [('raw frame (crop): micro-images', crop, 'gray'),
              ('central view: corners found',
               plt.imread(demo_dir / 'report' / 'detections_000_frame_000.png'), None),
              ('board poses recovered', plt.imread(demo_dir / 'report' / 'poses.png'), None)]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, (title, image, cmap) in zip(axes, panels):
        ax.imshow(image, cmap=cmap, interpolation='nearest')
        ax.set_title(title, fontsize=10)
        ax.axis('off')
    fig.tight_layout()
    out = Path(__file__).resolve().parent / 'images' / 'demo.png'
    fig.savefig(out, dpi=80)
    print(out)


if __name__ == '__main__':
    main(sys.argv[1])
