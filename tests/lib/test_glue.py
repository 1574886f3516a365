"""attnlib.glue: without myst-nb (the students' environment) a glued value is stored exactly as myst-nb stores it."""

from __future__ import annotations

import IPython.display
import myst_nb
import myst_nb.ext.glue as myst_glue
import numpy as np
import pytest
import torch

from attnlib import glue as attnlib_glue

VALUES = [0.8213, 4096, "1/2,981", np.float64(0.125), [1, 2], {"a": 1}]


def _displayed(monkeypatch, module, attribute, call) -> list[tuple[tuple, dict]]:
    """What ``call()`` hands to the display function ``module.attribute``."""
    shown = []
    monkeypatch.setattr(module, attribute, lambda *args, **kwargs: shown.append((args, kwargs)))
    call()
    return shown


@pytest.mark.parametrize("display", [True, False])
@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ for v in VALUES])
def test_record_stores_what_myst_nb_stores(monkeypatch, value, display):
    theirs = _displayed(monkeypatch, myst_glue, "ipy_display", lambda: myst_nb.glue("x", value, display))
    ours = _displayed(monkeypatch, IPython.display, "display", lambda: attnlib_glue.record("x", value, display))
    assert ours == theirs, f"attnlib.glue.record stores {ours}, myst-nb's glue {theirs}"
    (data,), kwargs = ours[0]
    assert kwargs["metadata"]["scrapbook"] == {"name": "x", "mime_prefix": "" if display else
                                               attnlib_glue.HIDDEN_PREFIX}
    assert all(mime.startswith(attnlib_glue.HIDDEN_PREFIX) != display for mime in data), data


def test_chapters_get_myst_nbs_glue_where_myst_nb_is_installed():
    assert attnlib_glue._store is myst_nb.glue


def test_glue_stores_what_myst_nb_stores_of_the_value_as_a_float(monkeypatch):
    theirs = _displayed(monkeypatch, myst_glue, "ipy_display", lambda: myst_nb.glue("x", 0.25, False))
    ours = _displayed(monkeypatch, myst_glue, "ipy_display",
                      lambda: attnlib_glue.glue("x", torch.tensor(0.25), display=False))
    assert ours == theirs, f"glue of a tensor stores {ours}, myst-nb's glue of 0.25 {theirs}"


FLOATS = [0.9161047784667921, np.float64(0.9161047784667921), np.float32(0.5),
          torch.tensor(0.9161047784667921, dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64),
          np.array(0.9161047784667921)]


@pytest.mark.parametrize("value", FLOATS, ids=[type(v).__name__ + str(getattr(v, "shape", "")) for v in FLOATS])
def test_a_one_element_float_is_stored_as_a_python_float(value):
    stored = attnlib_glue.as_number(value)
    assert type(stored) is float and stored == float(np.asarray(value).item()), repr(stored)


@pytest.mark.parametrize("value", [4096, np.int64(7), True, "1/2,981", [0.5, 0.25], torch.tensor([1.0, 2.0]),
                                   torch.tensor(3)], ids=lambda v: type(v).__name__)
def test_other_values_pass_unchanged(value):
    assert attnlib_glue.as_number(value) is value


def test_glue_output_of_a_hidden_number_is_its_text():
    data, metadata = attnlib_glue.glue_output("n", 4096, display=False)
    assert data == {attnlib_glue.HIDDEN_PREFIX + "text/plain": "4096"}
    assert metadata == {"scrapbook": {"name": "n", "mime_prefix": attnlib_glue.HIDDEN_PREFIX}}
