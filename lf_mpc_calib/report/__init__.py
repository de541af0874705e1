"""Reports of a calibration: text summaries and PNG plots (matplotlib, Agg backend)."""
