"""
What every stage shares: the MPC camera model, rotations, the calibration board and the
observation table (board points and the indexed pixels that see them).
"""
