"""
The simulator's camera presets and Bayer patterns by name, importable without the optics (the
command line offers them as choices before anything heavy is loaded).
"""

BAYER_PATTERNS = ('rggb', 'bggr', 'grbg', 'gbrg')
PRESETS = ('lytro', 'illum', 'lab-square', 'focused-keplerian', 'focused-galilean',
           'focused-multifocus')
