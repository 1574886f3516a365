"""The grader's helper inside a student's kernel: ``StudentKernel`` (attncourse/boundary.py) sends this file's text
into the sandboxed kernel, which runs it as a cell before the first call. Nothing of the kit imports it.

Every name it defines starts with ``__boundary_`` (it lands in the student's namespace), and it imports inside its
functions for the same reason. ``__boundary_call`` runs one call of a student's function and writes the outcome as
data only: JSON for the structure, an ``.npz`` for the arrays and tensors (``__boundary_encode``), which the grader
reads back with ``boundary.read_reply`` and ``boundary.decode``, never with pickle.
"""

# ruff: noqa: PLC0415 - the imports are inside the functions: a top-level one would land in the student's namespace


def __boundary_encode(value, arrays: dict, depth: int = 0) -> dict:
    """``value`` as a JSON-ready node; its arrays go into ``arrays`` under the keys the nodes name."""
    import numpy as np

    if depth > 20:
        raise TypeError("the result nests too deeply")
    if value is None or isinstance(value, bool | str):
        return {"t": "plain", "v": value}
    if isinstance(value, int | float):
        return {"t": type(value).__name__, "v": repr(value)}
    if type(value).__module__ == "torch" and type(value).__name__ == "Tensor":
        key = f"a{len(arrays)}"
        arrays[key] = value.detach().cpu().numpy()
        return {"t": "tensor", "k": key}
    if isinstance(value, np.ndarray | np.generic):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(value)
        return {"t": "ndarray" if isinstance(value, np.ndarray) else "scalar", "k": key}
    if isinstance(value, list | tuple):
        return {"t": type(value).__name__, "v": [__boundary_encode(v, arrays, depth + 1) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"t": "dict", "v": {k: __boundary_encode(v, arrays, depth + 1) for k, v in value.items()}}
    raise TypeError(f"a result of type {type(value).__name__} cannot be graded (expected arrays, tensors, "
                    f"numbers, strings, lists, tuples or dicts of them)")


def __boundary_function(name: str):
    """The student's ``name`` from the kernel's namespace."""
    from IPython import get_ipython

    user_ns = get_ipython().user_ns
    if name not in user_ns:
        raise NameError(f"name {name!r} is not defined")
    return user_ns[name]


def __boundary_violations(name: str, names: list, operators: list) -> list[str]:
    """``attnlib.exercises.violations`` of the student's function, as text."""
    from attnlib.exercises import violations

    return [str(v) for v in violations(__boundary_function(name), names, operators)]


def __boundary_watch(name: str, args: tuple, kwargs: dict):
    """``attnlib.exercises.watch`` run on the student's function, as data."""
    from attnlib.exercises import watch

    return watch(__boundary_function(name), *args, **kwargs).data()


def __boundary_run(name: str, args: tuple, kwargs: dict, trace: bool) -> dict:
    """The call's outcome: ``value`` (the result itself) or ``raised`` (type and message), and ``peak`` traced bytes."""
    import tracemalloc

    outcome = {}
    try:
        if trace:
            tracemalloc.start()
        try:
            outcome["value"] = __boundary_function(name)(*args, **kwargs)
            outcome["peak"] = tracemalloc.get_traced_memory()[1] if trace else 0
        finally:
            if trace:
                tracemalloc.stop()
    except BaseException as error:  # noqa: BLE001 - whatever the student's code raised is the outcome
        outcome["raised"] = [type(error).__name__, str(error)[:2000]]
    return outcome


def __boundary_call(name: str, request: str, reply: str) -> None:
    """Run ``name`` on the pickled ``(args, kwargs, trace)`` in ``request``; write ``reply.json`` and ``reply.npz``."""
    import json
    import pickle
    import warnings

    import numpy as np

    with open(request, "rb") as handle:
        args, kwargs, trace = pickle.load(handle)  # noqa: S301 - the grader's own request
    arrays = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = __boundary_run(name, args, kwargs, trace)
        if "value" in outcome:
            try:
                outcome["value"] = __boundary_encode(outcome["value"], arrays)
            except BaseException as error:  # noqa: BLE001 - a result that cannot be sent is the outcome
                del outcome["value"]
                outcome["raised"] = [type(error).__name__, str(error)[:2000]]
    outcome["warnings"] = [[w.category.__name__, str(w.message)[:500]] for w in caught[:20]]
    np.savez(reply + ".npz", **arrays)
    with open(reply + ".json", "w") as handle:
        json.dump(outcome, handle)
