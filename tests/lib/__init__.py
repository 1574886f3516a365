"""attnlib's tests: the maths against torch, NumPy twins, bad input, views, widgets, plots, models, interpret,
style. Fast, but for those marked ``slow`` (model loading, training) or ``browser`` (the views in Chromium), which
``make check`` leaves to ``make test``."""
