"""Features for calibration: checkerboard corners across views or micro-images -> observations."""
