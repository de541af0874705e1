"""Matplotlib set up for files only (Agg backend), imported when a plot is made."""


def pyplot():
    """``matplotlib.pyplot`` with the Agg backend (nothing is shown on screen)."""
    import matplotlib
    matplotlib.use('Agg', force=False)
    import matplotlib.pyplot as plt
    return plt
