"""Stand-ins: an earlier exercise's name bound, for one check, to another implementation wherever the code under test
reads it (the course's part in place of the learner's, or the grader's in the learner's process), then put back.

Used by `utils.grading.standing_in` in a live kernel and by the learner's worker (`utils.engine.worker`) while grading.
"""

from __future__ import annotations

import types
from typing import Any

_ABSENT = object()  # a global that was not defined before a stand-in took its name


def replace_globals(target: Any, parts: dict[str, Any]) -> list[tuple[dict[str, Any], str, Any]]:
    """Bind each of `parts` in the global namespaces `target`'s code reads, where its code uses that name; return
    (namespace, name, what was there) for `put_back`. A name the code reads but that is not defined (its cell has a
    SyntaxError) is bound too: the bug then costs points in its own exercise, not a NameError in every later one."""
    saved = []
    reads = _global_reads(target)
    for namespace in _namespaces(target):
        for name, part in parts.items():
            if name in namespace or name in reads:
                saved.append((namespace, name, namespace.get(name, _ABSENT)))
                namespace[name] = part
    return saved


def put_back(saved: list[tuple[dict[str, Any], str, Any]]) -> None:
    """Undo `replace_globals`, newest first; a name that was not defined is removed again."""
    for namespace, name, original in reversed(saved):
        if original is _ABSENT:
            namespace.pop(name, None)
        else:
            namespace[name] = original


def _namespaces(target: Any) -> list[dict[str, Any]]:
    """The global namespaces that `target`'s own Python code reads (a function's, or a class's methods')."""
    namespaces: list[dict[str, Any]] = []
    for fn in _functions(target):
        if not any(fn.__globals__ is ns for ns in namespaces):
            namespaces.append(fn.__globals__)
    return namespaces


def _global_reads(target: Any) -> set[str]:
    """The names `target`'s code may look up as globals (nested functions and comprehensions included)."""
    names: set[str] = set()
    codes = [fn.__code__ for fn in _functions(target)]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return names


def _functions(target: Any) -> list[types.FunctionType]:
    """The Python functions that make up `target`: itself, or a class's (and its bases') methods."""
    functions = []
    if isinstance(target, types.FunctionType):
        functions.append(target)
    else:
        cls = target if isinstance(target, type) else type(target)
        for klass in getattr(cls, "__mro__", ()):
            if klass.__module__.split(".")[0] in ("torch", "builtins"):
                continue
            for value in vars(klass).values():
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                elif isinstance(value, property):
                    value = value.fget
                if isinstance(value, types.FunctionType):
                    functions.append(value)
    return functions
