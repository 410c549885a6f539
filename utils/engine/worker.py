"""The learner's side of two-process grading: run notebook cells, answer the grader's calls with plain data.

Started by the grader (``utils.engine.sandbox``) with a socket as file descriptor ``argv[1]``. Everything here runs
next to the learner's code and may be changed by it; the grader trusts none of it. It only ever receives
inputs, never an expected value, so the one way to make a check pass is to compute the right tensors.
"""

from __future__ import annotations

import gc
import linecache
import os
import socket
import sys
import traceback
import types
from typing import Any

from ..substitute import put_back, replace_globals
from .protocol import MAX_ITEMS, MAX_PAYLOAD, MAX_TEXT, REQUESTS, ProtocolError, pack, receive

ERROR_WHERE_FRAMES = ("<cell ",)


class Worker:
    """Holds the learner's namespace, the objects the grader refers to, and calls recorded for backward."""

    def __init__(self) -> None:
        import torch
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False
        self.torch = torch
        self.shell = InteractiveShell.instance(config=config)
        self.ns = self.shell.user_ns
        self.handles: dict[int, Any] = {}
        self.handle_of: dict[int, int] = {}
        self.records: dict[int, tuple[list[Any], list[Any]]] = {}
        self.calls = 0
        self.cells = 0
        self.sock: socket.socket | None = None
        self.substituted: list[tuple[dict[str, Any], str, Any]] = []  # (namespace, name, the learner's object)

    # -- cells ---------------------------------------------------------------------------------------------
    def run_cell(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        source = str(msg.get("source", ""))
        self.cells += 1
        filename = f"<cell {self.cells}: {str(msg.get('name', ''))[:60]}>"
        try:
            code_text = self.shell.transform_cell(source)
            linecache.cache[filename] = (len(code_text), None, code_text.splitlines(True), filename)
            code = compile(code_text, filename, "exec")
        except SyntaxError as exc:
            line = (exc.text or "").strip()
            return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc.msg)[:MAX_TEXT],
                                           "line": exc.lineno, "text": line[:MAX_TEXT]}}, {}
        try:
            exec(code, self.ns)  # noqa: S102 - this process exists to run the learner's code
        except BaseException as exc:  # noqa: BLE001 - report everything, SystemExit and KeyboardInterrupt too
            return {"ok": False, "error": describe(exc)}, {}
        finally:
            _close_figures()
        return {"ok": True}, {}

    # -- objects -------------------------------------------------------------------------------------------
    def resolve(self, ref: Any) -> Any:
        if isinstance(ref, dict) and isinstance(ref.get("global"), str):
            name = ref["global"]
            if name not in self.ns:
                raise NameError(f"name '{name}' is not defined", name=name)
            return self.ns[name]
        if isinstance(ref, dict) and isinstance(ref.get("local"), str):  # course code (utils.grading.LocalPart)
            from ..attention_variants import local_part

            return local_part(ref["local"])
        if isinstance(ref, dict) and isinstance(ref.get("h"), int) and ref["h"] in self.handles:
            return self.handles[ref["h"]]
        raise ProtocolError("an unknown object reference")

    def handle(self, obj: Any) -> dict[str, Any]:
        key = self.handle_of.get(id(obj))
        if key is None or self.handles.get(key) is not obj:
            key = len(self.handles) + 1
            while key in self.handles:
                key += 1
            self.handles[key] = obj
            self.handle_of[id(obj)] = key
        cls = type(obj)
        mro = [f"{c.__module__}.{c.__qualname__}" for c in getattr(cls, "__mro__", ())][:50]
        try:
            text = repr(obj)[:200]
        except Exception:  # noqa: BLE001
            text = ""
        return {"t": "obj", "h": key, "type": cls.__name__[:100], "mro": mro, "callable": callable(obj), "repr": text}

    def decode(self, value: Any, tensors: dict[str, Any], grads: list[Any]) -> Any:
        if value is None or type(value) in (bool, int, float, str):
            return value
        if type(value) is not dict:
            raise ProtocolError("an argument of an unknown kind")
        kind, items = value.get("t"), value.get("v")
        if kind == "tensor":
            tensor = tensors[str(value.get("k"))]
            if value.get("rg") and tensor.is_floating_point() and not tensor.requires_grad:
                tensor.requires_grad_(True)
                grads.append(tensor)
            return tensor
        if kind == "ref":
            return self.resolve(value.get("ref"))
        if kind in ("tuple", "list"):
            decoded = [self.decode(v, tensors, grads) for v in items]
            return tuple(decoded) if kind == "tuple" else decoded
        if kind == "dict":
            return {self.decode(k, tensors, grads): self.decode(v, tensors, grads) for k, v in items}
        if kind == "dtype":
            return getattr(self.torch, items)
        if kind == "device":
            return self.torch.device(items)
        if kind == "slice":
            return slice(*(self.decode(v, tensors, grads) for v in items))
        if kind == "ellipsis":
            return Ellipsis
        raise ProtocolError("an argument of an unknown kind")

    def encode(self, value: Any, out: list[Any], depth: int = 0) -> Any:
        """JSON for `value`, with its tensors appended to `out`; anything else becomes a handle."""
        torch = self.torch
        if depth > 20:
            return self.handle(value)
        if value is None or isinstance(value, bool):
            return None if value is None else bool(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, str):
            return str(value)[: MAX_TEXT * 50]
        if isinstance(value, torch.Tensor):
            out.append(value)
            encoded = {"t": "tensor", "k": f"r{len(out) - 1}"}
            grad = value.grad if value.is_leaf and value.requires_grad else None
            if isinstance(grad, torch.Tensor):  # a parameter after backward: its gradient travels with it
                encoded["g"] = self.encode(grad, out, depth + 1)
            return encoded
        if isinstance(value, torch.Size):
            return {"t": "tuple", "v": [int(v) for v in value]}
        if isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS:
            kind = "list" if isinstance(value, list) else "tuple"
            return {"t": kind, "v": [self.encode(v, out, depth + 1) for v in value]}
        if isinstance(value, dict) and len(value) <= MAX_ITEMS and all(type(k) in (str, int) for k in value):
            return {"t": "dict", "v": [[k, self.encode(v, out, depth + 1)] for k, v in value.items()]}
        if isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"t": "device", "v": str(value)}
        if isinstance(value, (types.GeneratorType, map, filter, zip, enumerate)):
            items = []
            for item in value:
                items.append(item)
                if len(items) > MAX_ITEMS:
                    break
            return {"t": "list", "v": [self.encode(v, out, depth + 1) for v in items]}
        return self.handle(value)

    def reply_value(self, value: Any, extra: dict[str, Any] | None = None, out: list[Any] | None = None) -> tuple[dict, dict]:
        """The reply carrying `value`; the tensors it holds are appended to `out`."""
        torch = self.torch
        out = [] if out is None else out
        encoded = self.encode(value, out)
        tensors, total = {}, 0
        for i, t in enumerate(out):
            with torch._C.DisableTorchFunctionSubclass():
                plain = t.detach().cpu().contiguous().clone()
            plain = plain.as_subclass(torch.Tensor) if type(plain) is not torch.Tensor else plain
            total += plain.numel() * plain.element_size()
            if total > MAX_PAYLOAD // 2:
                raise MemoryError(f"the result is larger than {MAX_PAYLOAD // 2**21} MB")
            tensors[f"r{i}"] = plain
        reply = {"ok": True, "value": encoded, **(extra or {})}
        reply["requires_grad"] = [bool(t.requires_grad) for t in out]
        return reply, tensors

    # -- requests ------------------------------------------------------------------------------------------
    def call(self, msg: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict, dict]:
        torch = self.torch
        target = self.resolve(msg.get("ref"))
        needs_grad: list[Any] = []
        args = self.decode(msg.get("args"), tensors, needs_grad)
        kwargs = self.decode(msg.get("kwargs"), tensors, needs_grad)
        before = {k: t.detach().clone() for k, t in tensors.items()}
        torch.manual_seed(int(msg.get("seed", 0)))
        grad = bool(msg.get("grad"))
        try:
            with torch.enable_grad() if grad else torch.no_grad():
                result = target(*args, **kwargs)
        finally:
            _close_figures()  # a learner's debugging plot per call must not pile up
        changed = _changed(before, tensors)
        if changed:
            return {"ok": False, "error": {"type": "InPlaceEdit", "modified": True, "message": (
                f"{_name(target)} changed {changed} of its input tensors in place; the caller still needs them "
                "unchanged: compute a new tensor instead (y = x + ..., not x += ... or x.add_(...))")}}, {}
        self.calls += 1
        outs: list[Any] = []
        reply, payload = self.reply_value(result, {"call": self.calls}, outs)
        if grad and any(reply["requires_grad"]):
            self.records[self.calls] = (needs_grad, outs)
        return reply, payload

    def backward(self, msg: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict, dict]:
        torch = self.torch
        record = self.records.pop(int(msg.get("call", -1)), None)
        if record is None:
            raise RuntimeError("this result's computation graph is gone (backward called twice?)")
        inputs, outs = record
        grads = self.decode(msg.get("grads"), tensors, [])
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g.to(o.dtype) for o, g in pairs])
        return self.reply_value([x.grad for x in inputs])

    def getattr(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        return self.reply_value(getattr(self.resolve(msg.get("ref")), str(msg.get("name"))))

    def iter(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        items = []
        for item in self.resolve(msg.get("ref")):
            items.append(item)
            if len(items) > MAX_ITEMS:
                break
        return self.reply_value(items)

    def len(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        return self.reply_value(len(self.resolve(msg.get("ref"))))

    def getitem(self, msg: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict, dict]:
        return self.reply_value(self.resolve(msg.get("ref"))[self.decode(msg.get("key"), tensors, [])])

    def reset(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        self.handles.clear()
        self.handle_of.clear()
        self.records.clear()
        gc.collect()
        return {"ok": True}, {}

    def hello(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        return {"ok": True, "pid": os.getpid()}, {}

    # -- the grader's parts standing in for the learner's earlier exercises ---------------------------------
    def substitute(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        """Make the globals `names` that `ref`'s code reads call back to the grader, until `restore`.

        The stand-ins carry no code of the grader's: each call sends its arguments to the grader, which answers
        with the result of its own implementation, and only while the grader has it registered.
        """
        target = self.resolve(msg.get("ref"))
        names = self.decode(msg.get("names"), {}, [])
        names = [n for n in names if isinstance(n, str)][:20] if isinstance(names, list) else []
        taken = {(id(ns), n) for ns, n, _ in self.substituted}
        parts = {name: self._stand_in(name) for name in names}
        local = self.decode(msg.get("local"), {}, [])
        if isinstance(local, dict):  # course code that runs here (utils.grading.LocalPart): no call back
            from ..attention_variants import local_part

            for name, part in list(local.items())[:20]:
                if isinstance(name, str) and isinstance(part, str):
                    parts[name] = local_part(part)
        saved = [s for s in replace_globals(target, parts) if (id(s[0]), s[1]) not in taken]
        self.substituted += saved
        return self.reply_value(sorted({name for _, name, _ in saved}))

    def restore(self, msg: dict[str, Any], _: dict) -> tuple[dict, dict]:
        put_back(self.substituted)
        self.substituted = []
        return {"ok": True}, {}

    def _stand_in(self, name: str) -> Any:
        def stand_in(*args: Any, **kwargs: Any) -> Any:
            return self.call_back(name, args, kwargs)

        stand_in.__name__ = stand_in.__qualname__ = name
        return stand_in

    def call_back(self, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Ask the grader for its `name`(*args, **kwargs); its answer is plain data (tensors, numbers)."""
        if self.sock is None:
            raise RuntimeError(f"{name} is standing in for yours but the grader cannot be reached")
        out: list[Any] = []
        header = {"callback": name, "args": self.encode(list(args), out), "kwargs": self.encode(dict(kwargs), out)}
        torch = self.torch
        tensors = {}
        for i, t in enumerate(out):
            with torch._C.DisableTorchFunctionSubclass():
                plain = t.detach().cpu().contiguous().clone()
            tensors[f"r{i}"] = plain.as_subclass(torch.Tensor) if type(plain) is not torch.Tensor else plain
        self.sock.sendall(pack(header, tensors))
        reply, payload = receive(self.sock)
        if reply.get("ok") is not True:
            raise TypeError(str(reply.get("message", f"the course's {name} failed"))[:MAX_TEXT])
        return self.decode(reply.get("value"), payload, [])


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass


def _name(obj: Any) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(type(obj), "__qualname__", "the function")
    return f"`{str(name)[:60]}`"


def _changed(before: dict[str, Any], after: dict[str, Any]) -> int:
    torch = sys.modules["torch"]
    count = 0
    for key, old in before.items():
        new = after[key].detach()
        if old.shape != new.shape or old.dtype != new.dtype:
            count += 1
            continue
        a = old.contiguous().reshape(-1)
        b = new.contiguous().reshape(-1)
        if a.numel() and not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
            count += 1
    return count


def describe(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its type, message and the learner's line that raised it ({function, line, code})."""
    where = None
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(ERROR_WHERE_FRAMES)]
    if frames:
        frame = frames[-1]
        where = {"function": str(frame.name)[:200], "line": frame.lineno, "code": (frame.line or "").strip()[:200]}
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001
        message = ""
    error = {"type": type(exc).__name__, "message": message[:MAX_TEXT], "where": where,
             "base": not isinstance(exc, Exception)}
    if isinstance(exc, NameError) and getattr(exc, "name", None):
        error["name"] = str(exc.name)
        if not error["message"] or error["message"] == exc.name:
            error["message"] = f"name '{exc.name}' is not defined"
    return error


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    worker = Worker()
    # Everything loaded so far (torch, IPython, matplotlib: some 10^5 objects, most of them inherited from the zygote)
    # lives as long as the worker: out of the collector's sight, each `reset` (a full collection) takes milliseconds,
    # not 0.2 s, and so do the collections the learner's code triggers.
    gc.freeze()
    worker.sock = sock
    ops = {name: getattr(worker, name) for name in REQUESTS}
    while True:
        try:
            msg, tensors = receive(sock)
        except (EOFError, OSError, ProtocolError):
            return 0
        op = ops.get(str(msg.get("op")))
        try:
            if op is None:
                raise ProtocolError(f"unknown request {msg.get('op')!r}")
            reply, payload = op(msg, tensors)
        except BaseException as exc:  # noqa: BLE001 - the learner's SystemExit and KeyboardInterrupt included
            reply, payload = {"ok": False, "error": describe(exc)}, {}
        try:
            data = pack(reply, payload)
        except Exception as exc:  # noqa: BLE001 - e.g. a tensor safetensors cannot store
            data = pack({"ok": False, "error": describe(exc)})
        sock.sendall(data)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
