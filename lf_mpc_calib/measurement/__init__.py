"""The live side: measuring in 3-D with a calibrated camera, frame after frame."""
