"""Reproductions of the paper's experiments (``lf-mpc-calib bench``)."""
