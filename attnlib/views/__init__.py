"""Views of attention: matplotlib figures (plots), kernel-free explorers (widgets), offline BertViz views.

``from attnlib.views import head_view, model_view, neuron_view`` gives BertViz's three views
(``attnlib.views.bertviz`` and ``attnlib.views.neuron``); they are imported on first use, so that
``attnlib.views.plots`` does not need BertViz installed.
"""

from importlib import import_module

_LAZY = {"head_view": "attnlib.views.bertviz", "model_view": "attnlib.views.bertviz",
         "neuron_view": "attnlib.views.neuron"}
__all__ = ["head_view", "model_view", "neuron_view"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'attnlib.views' has no attribute {name!r}")
