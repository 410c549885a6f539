"""The grader's side of two-process grading: messages to the learner's worker, and proxies for its objects.

The learner's code runs in a worker process (``utils.engine.worker``). The grader never runs it: a name such as
``softmax`` in a test cell is a :class:`RemoteObject` whose calls travel to the worker as messages and whose
results come back as plain data. A message is a JSON header plus tensors serialised with safetensors, so
decoding it runs no code of the sender's (no pickle). Whatever the worker sends is only data: a wrong answer,
a forged one or garbage can fail a check, never pass one that needs the right tensors.

Tensors that the grader sends keep their identity (the same tensor twice arrives as one object), gradients
flow back through :class:`_Attach` (the worker records the call and answers ``backward`` requests), and a call
that changes one of its tensor arguments in place fails with a message: the grader's own tensors never change.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..failures import CheckFailure
from ..results import Where
from .protocol import MAX_ITEMS, MAX_TEXT, ProtocolError, pack, receive

REPLAY_S = 1.0  # a call that took longer is not made a second time to see whether its result varies
#: Seconds between two measurements of the learner's processes while the grader waits for them.
POLL_S = 0.1
#: A limit of N seconds of CPU time is also one of N seconds spent waiting (code that sleeps or blocks spends no CPU
#: time: its processes are neither running nor ready to run), and, whatever happens, of WALL_FACTOR * N seconds on the
#: wall clock: a machine loaded tenfold still grades, a busy one stretches the wall clock, not the CPU time.
WALL_FACTOR = float(os.environ.get("ATTN_WALL_FACTOR", "10"))
#: CPU seconds that the learner's processes other than the worker may spend within one limit. Code that computes does
#: so in the worker (or in a child it waits for); processes that compute beside it, a fork bomb's, stop the grading
#: of that submission, so that they cannot take the machine from the others graded beside it for long.
STRAY_CPU_S = float(os.environ.get("ATTN_STRAY_CPU", "3"))

#: Exceptions a learner's code may raise that the grader re-raises as themselves (checks may expect them).
_BUILTIN_ERRORS: dict[str, type[Exception]] = {
    e.__name__: e
    for e in (
        ValueError, TypeError, IndexError, KeyError, LookupError, RuntimeError, AttributeError, ZeroDivisionError,
        OverflowError, FloatingPointError, ArithmeticError, AssertionError, NotImplementedError, MemoryError,
        RecursionError, UnboundLocalError, ImportError, ModuleNotFoundError,
    )
}


# -- what crosses the boundary ------------------------------------------------------------------------------
class LearnerError(Exception):
    """An exception raised by the learner's code that is not one of the builtins checks may expect."""


class LearnerAbort(BaseException):
    """The learner's code raised SystemExit, KeyboardInterrupt or another BaseException: the exercise is lost."""


class WorkerLost(BaseException):
    """The worker ran past its time limit, died, or broke the protocol; it has been stopped.

    Its message is the reason: "cpu", "idle", "wall", "memory" (`Budget`), "stray" (processes beside the worker
    computed or filled memory: a fork bomb), "died", "protocol: ..." or "timeout"."""


class Budget:
    """What the learner's code may still spend before the grader stops it, measured over all its processes together
    (`utils.engine.sandbox.Zygote.usage`): `seconds` of CPU time, so that another submission's load costs it nothing;
    as many seconds spent waiting (none of its processes running or ready to run, little CPU time), for code that
    sleeps or blocks instead of computing; WALL_FACTOR times as long on the wall clock whatever happens; their memory
    together (`Usage.memory_limit`); and STRAY_CPU_S for processes beside the worker. Without a meter (no /proc:
    macOS), `seconds` on the wall clock. `wait()` is what `protocol.receive` asks while it waits for the worker."""

    def __init__(self, seconds: float, meter: Callable[[], Any] | None = None, *, outer: Budget | None = None,
                 since: Budget | None = None) -> None:
        """`outer`: a budget this one lies within (its wall-clock end applies too); `since`: count from where that one
        started (an exercise whose checks ask for a longer limit)."""
        self.seconds = seconds
        self.meter = meter
        if since is not None:
            self.t0, self.start = since.t0, since.start
        else:
            self.t0, self.start = time.monotonic(), meter() if meter is not None else None
        measured = self.start is not None
        self.wall_at = self.t0 + seconds * (WALL_FACTOR if measured else 1.0)
        if outer is not None:
            self.wall_at = min(self.wall_at, outer.wall_at)
        self.cpu_at = self.start.cpu + seconds if measured else math.inf
        self.checked = self.t0
        self.idle = since.idle if since is not None else 0.0  # seconds the learner's processes spent waiting
        self._waited = 0.0  # seconds the grader waited with nothing arriving, since the last measurement
        self._cpu = self.start.cpu if measured else 0.0  # the CPU time at the last measurement

    @classmethod
    def wall(cls, seconds: float) -> Budget:
        """`seconds` on the wall clock, nothing measured (waiting for a worker to start; a whole notebook)."""
        return cls(seconds)

    def spent(self) -> bool:
        return time.monotonic() >= self.wall_at

    def wait(self, waited: float = 0.0) -> float:
        """Seconds to wait before asking again (`waited`: the seconds just spent with nothing arriving);
        TimeoutError (the reason) once the budget is spent."""
        now = time.monotonic()
        if now >= self.wall_at:
            raise TimeoutError("wall")
        if self.start is None:
            return self.wall_at - now
        self._waited += waited
        if now - self.checked >= POLL_S:
            self.checked = now
            usage = self.meter()
            if usage is not None:
                self._check(usage)
        return min(POLL_S, self.wall_at - now)

    def _check(self, usage: Any) -> None:
        strays = (usage.cpu - usage.worker_cpu) - (self.start.cpu - self.start.worker_cpu)
        if strays > STRAY_CPU_S:
            raise TimeoutError("stray")
        if usage.memory > usage.memory_limit:
            raise TimeoutError("stray" if usage.memory - usage.worker_memory > usage.worker_memory else "memory")
        if usage.cpu >= self.cpu_at:
            raise TimeoutError("cpu")
        # While the grader waited: were the learner's processes waiting too (none running or ready to run, next to no
        # CPU time)? A process starved of the CPU by a busy machine is ready to run, and that time is not counted.
        if self._waited and not usage.running and usage.cpu - self._cpu < 0.1 * self._waited:
            self.idle += self._waited
        self._waited, self._cpu = 0.0, usage.cpu
        if self.idle >= self.seconds:
            raise TimeoutError("idle")

    def used(self) -> tuple[float, float]:
        """(CPU seconds, wall seconds) spent since it started (CPU: nan without a meter)."""
        usage = self.meter() if self.start is not None else None
        cpu = usage.cpu - self.start.cpu if usage is not None else math.nan
        return cpu, time.monotonic() - self.t0


def _where(error: dict[str, Any]) -> Where | None:
    """Where the learner's exception was raised, from what the worker reported (data: bounded, typed, or nothing)."""
    return Where.from_data(error.get("where"))


def _raise_learner_error(error: Any, names: dict[str, str]) -> None:
    """Re-raise, in the grader, the exception the worker reported (as data; nothing of it is executed)."""
    if not isinstance(error, dict):
        raise WorkerLost("the worker sent a malformed reply")
    kind = str(error.get("type", "Exception"))[:100]
    message = str(error.get("message", ""))[:MAX_TEXT]
    if error.get("base"):
        raise LearnerAbort(f"{kind}{': ' + message if message else ''}")
    if error.get("modified"):
        raise CheckFailure(message)
    if kind == "NameError" and error.get("name") in names:
        raise NameError(names[str(error["name"])])
    cls = _BUILTIN_ERRORS.get(kind)
    exc: Exception = cls(message) if cls is not None else LearnerError(f"{kind}: {message}")
    exc.learner_where = _where(error)  # type: ignore[attr-defined]
    exc.learner_type = kind  # type: ignore[attr-defined]
    raise exc


@dataclass
class _Encoder:
    """Turns call arguments into JSON plus a tensor table; the same tensor object is sent once."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    by_id: dict[int, str] = field(default_factory=dict)
    sent: list[torch.Tensor] = field(default_factory=list)  # the grader's tensors, in table order

    def __call__(self, value: Any) -> Any:
        if value is None or type(value) in (bool, int, float, str):
            return value
        if isinstance(value, RemoteObject):
            return {"t": "ref", "ref": value._attn_ref}
        if isinstance(value, torch.Tensor):
            key = self.by_id.get(id(value))
            if key is None:
                key = self.by_id[id(value)] = f"a{len(self.tensors)}"
                self.tensors[key] = value.detach().cpu().contiguous().clone()
                self.sent.append(value)
            return {"t": "tensor", "k": key, "rg": bool(value.requires_grad and torch.is_grad_enabled())}
        if isinstance(value, torch.Size):
            return {"t": "tuple", "v": [int(v) for v in value]}
        if isinstance(value, (tuple, list)):
            return {"t": type(value).__name__ if type(value) in (tuple, list) else "tuple", "v": [self(v) for v in value]}
        if isinstance(value, dict):
            return {"t": "dict", "v": [[self(k), self(v)] for k, v in value.items()]}
        if isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"t": "device", "v": str(value)}
        if isinstance(value, slice):
            return {"t": "slice", "v": [self(value.start), self(value.stop), self(value.step)]}
        if value is Ellipsis:
            return {"t": "ellipsis"}
        raise TypeError(
            f"cannot send a {type(value).__name__} to the learner's process (only tensors, numbers, strings, "
            "dtypes, containers of them, and the learner's own objects): this is a bug in the test"
        )


# -- the worker process, seen from the grader ----------------------------------------------------------------
class Worker:
    """One worker process running the learner's code (forked by `utils.engine.sandbox.Zygote`), and the messages to it."""

    def __init__(self, zygote: Any, ready_timeout: float = 60.0) -> None:
        self.zygote = zygote
        self.sock, self.pid = zygote.spawn()
        self.deadline: Budget | None = None
        self.names: dict[str, str] = {}  # exercise name -> why it is missing, for NameError messages
        self.dead_reason: str | None = None
        self.callbacks: dict[str, Any] = {}  # name -> the grader's function standing in for the learner's
        # The last calls whose result held tensors: (callee, args, kwargs, those tensors, the seed the worker's
        # random number generator was given), to ask a second time.
        self.recent: deque[tuple[RemoteObject, tuple, dict[str, Any], list[torch.Tensor], int]] = deque(maxlen=8)
        self.last_seed = 0
        #: What made the last result `varies` found changing: "random" (random numbers: a different seed changes
        #: it, the same seed does not) or "unseeded" (it changes with the same seed: memory nothing wrote, or state
        #: kept between calls).
        self.varied_by: str | None = None
        self.exchange({"op": "hello"}, None, Budget.wall(ready_timeout))

    def usage(self) -> Any:
        """What the learner's processes have spent (`Zygote.usage`), this worker's own share told apart."""
        return self.zygote.usage(self.pid)

    def budget(self, seconds: float, outer: Budget | None = None) -> Budget:
        """A limit of `seconds` of the learner's CPU time from now (within `outer`)."""
        return Budget(seconds, self.usage, outer=outer)

    @property
    def alive(self) -> bool:
        if self.dead_reason is not None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def kill(self, reason: str = "stopped") -> None:
        """Stop the worker (what it started dies before the next worker starts, or when grading ends)."""
        if self.dead_reason is None:
            self.dead_reason = reason
        self.zygote.kill_worker(self.pid)
        self.sock.close()

    def exchange(
        self, header: dict[str, Any], tensors: dict[str, torch.Tensor] | None, deadline: Budget | None
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        if not self.alive:
            raise WorkerLost(self.dead_reason or "the worker is not running")
        try:
            self.sock.sendall(pack(header, tensors))
            reply, payload = receive(self.sock, deadline)
            while "callback" in reply:  # the learner's code called a part the grader stands in for
                self.sock.sendall(self._answer_callback(reply, payload))
                reply, payload = receive(self.sock, deadline)
            return reply, payload
        except TimeoutError as exc:
            reason = str(exc) or "timeout"
            self.kill(reason)
            raise WorkerLost(reason) from None
        except (EOFError, OSError):
            self.kill("died")
            raise WorkerLost("died") from None
        except ProtocolError as exc:
            self.kill("protocol")
            raise WorkerLost(f"protocol: {exc}") from None

    def request(
        self, header: dict[str, Any], tensors: dict[str, torch.Tensor] | None = None, deadline: Budget | None = None
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Send one request and wait (until `deadline`, else the worker's current one) for its reply."""
        reply, payload = self.exchange(header, tensors, deadline if deadline is not None else self.deadline)
        if reply.get("ok") is not True:
            _raise_learner_error(reply.get("error"), self.names)
        return reply, payload

    def _answer_callback(self, request: dict[str, Any], tensors: dict[str, torch.Tensor]) -> bytes:
        name = str(request.get("callback"))[:100]
        fn = self.callbacks.get(name)
        if fn is None:
            return pack({"ok": False, "message": f"the course's {name} is not standing in for yours now"})
        try:
            args = self.decode(request.get("args"), tensors)
            kwargs = self.decode(request.get("kwargs"), tensors)
            if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise TypeError("malformed arguments")
            with torch.no_grad():
                value = fn(*args, **kwargs)
            enc = _Encoder()
            return pack({"ok": True, "value": enc(value)}, enc.tensors)
        except Exception as exc:  # noqa: BLE001 - whatever the learner passed, the grader answers and goes on
            return pack({"ok": False, "message": (
                f"the course's {name}, standing in for yours while this exercise is graded, could not take these "
                f"arguments ({type(exc).__name__}: {str(exc)[:300]})")})

    @contextmanager
    def standing_in(self, ref: dict[str, Any], parts: dict[str, Any]) -> Iterator[list[str]]:
        """While inside, the globals `parts` that `ref`'s code reads are the grader's functions (called back)."""
        local = {n: p.name for n, p in parts.items() if type(p).__name__ == "LocalPart"}
        self.callbacks = {n: p for n, p in parts.items() if n not in local}
        try:
            yield self.simple("substitute", ref, names=sorted(self.callbacks), local=local)
        finally:
            self.callbacks = {}
            if self.alive:
                try:
                    self.request({"op": "restore"})
                except WorkerLost:
                    pass  # a worker that is gone keeps nothing to restore

    # -- what proxies ask for --------------------------------------------------------------------------------
    def decode(self, value: Any, tensors: dict[str, torch.Tensor], found: list[torch.Tensor] | None = None) -> Any:
        """Plain data from the worker's JSON: tensors from the table, its objects as RemoteObject."""
        if value is None or type(value) in (bool, int, float):
            return value
        if type(value) is str:
            return value[:MAX_TEXT * 50]
        if type(value) is not dict:
            raise WorkerLost("protocol: an encoded value of an unknown kind")
        kind = value.get("t")
        items = value.get("v")
        if kind == "tensor":
            tensor = tensors.get(str(value.get("k")))
            if tensor is None:
                raise WorkerLost("protocol: a reply refers to a tensor it did not send")
            if found is not None:
                found.append(tensor)
            grad = value.get("g")
            if grad is not None:
                grad = self.decode(grad, tensors, found)
                if type(grad) is torch.Tensor and grad.shape == tensor.shape and grad.dtype == tensor.dtype:
                    tensor.grad = grad
            return tensor
        if kind in ("tuple", "list") and type(items) is list and len(items) <= MAX_ITEMS:
            decoded = [self.decode(v, tensors, found) for v in items]
            return tuple(decoded) if kind == "tuple" else decoded
        if kind == "dict" and type(items) is list and len(items) <= MAX_ITEMS:
            out = {}
            for pair in items:
                if type(pair) is not list or len(pair) != 2:
                    raise WorkerLost("protocol: a malformed dict")
                key = self.decode(pair[0], tensors)
                if type(key) not in (str, int, float, bool, tuple) and key is not None:
                    raise WorkerLost("protocol: a dict key of an unusable kind")
                out[key] = self.decode(pair[1], tensors, found)
            return out
        if kind == "dtype" and type(items) is str and isinstance(getattr(torch, items, None), torch.dtype):
            return getattr(torch, items)
        if kind == "device" and type(items) is str:
            return torch.device("cpu") if items.startswith("cpu") else items[:100]
        if kind == "obj" and type(value.get("h")) is int:
            return RemoteObject(self, {"h": value["h"]}, value)
        raise WorkerLost("protocol: an encoded value of an unknown kind")

    def call(self, ref: dict[str, Any], args: tuple, kwargs: dict[str, Any], measure: bool = False,
             seed: int | None = None) -> Any:
        """Call the worker's object `ref`; the worker seeds its random number generator with `seed` first (drawn
        from this process's generator when None; `last_seed` keeps it)."""
        enc = _Encoder()
        self.last_seed = int(torch.randint(0, 2**62, ()).item()) if seed is None else seed
        header = {"op": "call", "ref": ref, "args": enc(list(args)), "kwargs": enc(dict(kwargs)),
                  "grad": torch.is_grad_enabled(), "seed": self.last_seed}
        if measure:
            before = self.reset_peak()
        reply, tensors = self.request(header, enc.tensors)
        if measure:
            peak = max(0, self.status_kib("VmHWM") - before) * 1024
        outs: list[torch.Tensor] = []
        value = self.decode(reply.get("value"), tensors, outs)
        needs = reply.get("requires_grad")
        if torch.is_grad_enabled() and type(needs) is list and len(needs) == len(outs) and any(needs):
            value = _attach(self, int(reply.get("call", -1)), enc.sent, value, outs, [bool(n) for n in needs])
        return (value, peak) if measure else value

    def remember(self, obj: RemoteObject, args: tuple, kwargs: dict[str, Any], value: Any) -> None:
        """Keep a (quick) call whose result holds tensors, so that `varies` can ask for it again."""
        outs = _tensors_in(value)
        if outs and not any(isinstance(a, RemoteObject) for a in _flat([*args, *kwargs.values()])):
            self.recent.append((obj, args, kwargs, outs, self.last_seed))

    def varies(self, tensor: torch.Tensor) -> int | None:
        """How many entries of `tensor`, the result of one of the last calls, differ when that call is made again
        with the same inputs; None when it cannot be asked again safely. `varied_by` says why: made again with the
        random number generator seeded as the first time, a result that still changes is not random numbers but
        memory nothing wrote (torch.empty not filled everywhere: a launch grid that leaves blocks out) or state
        kept between calls ("unseeded"); one that changes only with another seed is randomness ("random").

        Asked again: a function of the learner's, or a module in eval mode or without dropout layers, where the
        output must be deterministic. Not a method (a cache's update would append twice), not a call that was given
        another object of the learner's, not a module with dropout in train mode (random there, rightly).
        """
        self.varied_by = None
        for obj, args, kwargs, outs, seed in reversed(self.recent):
            index = next((i for i, t in enumerate(outs) if t is tensor), None)
            if index is None:
                continue
            module = obj._attn_class is not None and issubclass(obj._attn_class, torch.nn.Module)
            if not module and obj._attn_remote_type == "method":
                return None
            if module and obj.training is not False and any(
                    "Dropout" in getattr(m, "_attn_remote_type", "") for m in obj.modules()):
                return None
            for by, again_seed in (("unseeded", seed), ("random", None)):
                with torch.no_grad():
                    again = _tensors_in(self.call(obj._attn_ref, args, kwargs, seed=again_seed))
                if len(again) != len(outs) or again[index].shape != tensor.shape or \
                        again[index].dtype != tensor.dtype:
                    self.varied_by = by
                    return tensor.numel()
                same = torch.isclose(again[index], tensor.detach(), rtol=0, atol=0, equal_nan=True) \
                    if tensor.is_floating_point() or tensor.is_complex() else again[index] == tensor.detach()
                if not bool(same.all()):
                    self.varied_by = by
                    return int((~same).sum())
            return 0
        return None

    def simple(self, op: str, ref: dict[str, Any], **fields: Any) -> Any:
        enc = _Encoder()
        header = {"op": op, "ref": ref, **{k: enc(v) for k, v in fields.items()}}
        reply, tensors = self.request(header, enc.tensors)
        return self.decode(reply.get("value"), tensors)

    def backward(self, call_id: int, grads: tuple[torch.Tensor | None, ...]) -> list[torch.Tensor | None]:
        enc = _Encoder()
        reply, tensors = self.request({"op": "backward", "call": call_id, "grads": enc(list(grads))}, enc.tensors)
        value = self.decode(reply.get("value"), tensors)
        if type(value) is not list:
            raise WorkerLost("protocol: a malformed gradient reply")
        return value

    def status_kib(self, field: str) -> int:
        from ..blocks import proc_status_kib

        return proc_status_kib(self.pid, field)

    def reset_peak(self) -> int:
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")
        return self.status_kib("VmRSS")


class _Attach(torch.autograd.Function):
    """Connects tensors that came back from the worker to the grader's autograd graph."""

    @staticmethod
    def forward(ctx: Any, box: dict[str, Any], dummy: torch.Tensor, n_in: int, *tensors: torch.Tensor):  # type: ignore[override]
        ctx.box, ctx.n_in, ctx.n_out = box, n_in, len(tensors) - n_in
        outs = tuple(t.clone() for t in tensors[n_in:])
        ctx.mark_non_differentiable(*[o for o, need in zip(outs, box["needs"]) if not need])
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor):  # type: ignore[override]
        box = ctx.box
        sent = [g if need else None for g, need in zip(grads, box["needs"])]
        in_grads = box["worker"].backward(box["call"], tuple(sent))
        if len(in_grads) != ctx.n_in:
            raise WorkerLost("protocol: gradients for the wrong number of inputs")
        checked = []
        for g, x in zip(in_grads, box["inputs"]):
            if g is not None and (type(g) is not torch.Tensor or g.shape != x.shape):
                raise CheckFailure(f"the gradient for an input of shape {tuple(x.shape)} came back with the wrong shape.")
            checked.append(None if g is None else g.to(x.dtype))
        return (None, None, None, *checked, *([None] * ctx.n_out))


def _attach(worker: Worker, call_id: int, sent: list[torch.Tensor], value: Any, outs: list[torch.Tensor],
            needs: list[bool]) -> Any:
    inputs = [t for t in sent if t.requires_grad and t.is_floating_point()]
    box = {"worker": worker, "call": call_id, "needs": needs, "inputs": inputs}
    dummy = torch.zeros((), requires_grad=True)
    attached = _Attach.apply(box, dummy, len(inputs), *inputs, *outs)
    if isinstance(attached, torch.Tensor):
        attached = (attached,)
    swap = {id(o): a for o, a in zip(outs, attached)}

    def rebuild(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return swap.get(id(v), v)
        if isinstance(v, tuple):
            return tuple(rebuild(x) for x in v)
        if isinstance(v, list):
            return [rebuild(x) for x in v]
        if isinstance(v, dict):
            return {k: rebuild(x) for k, x in v.items()}
        return v

    return rebuild(value)


def _flat(value: Any) -> list[Any]:
    """The leaves of nested tuples, lists and dicts."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flat(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _flat(v)]
    return [value]


def _tensors_in(value: Any) -> list[torch.Tensor]:
    return [v for v in _flat(value) if isinstance(v, torch.Tensor)]


# -- proxies --------------------------------------------------------------------------------------------------
_LOCAL_CLASSES: dict[str, type] = {}


def _local_class(mro: Any) -> type | None:
    """The most derived torch class the worker says its object is (only for isinstance; nothing is built)."""
    if type(mro) is not list:
        return None
    for name in mro[:50]:
        if type(name) is not str or not name.startswith("torch."):
            continue
        if name not in _LOCAL_CLASSES:
            obj: Any = torch
            for part in name.split(".")[1:]:
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            _LOCAL_CLASSES[name] = obj if isinstance(obj, type) else None  # type: ignore[assignment]
        if _LOCAL_CLASSES[name] is not None:
            return _LOCAL_CLASSES[name]
    return None


class RemoteObject:
    """An object living in the learner's process: calls, attributes, items and iteration are requests to it."""

    _attn_remote_type = "object"

    def __init__(self, worker: Worker, ref: dict[str, Any], info: dict[str, Any] | None = None) -> None:
        info = info or {}
        object.__setattr__(self, "_attn_worker", worker)
        object.__setattr__(self, "_attn_ref", ref)
        object.__setattr__(self, "_attn_remote_type", str(info.get("type", ref.get("global", "object")))[:100])
        object.__setattr__(self, "_attn_class", _local_class(info.get("mro")))

    def _attn_part(self, name: str) -> RemoteObject:
        """The course's local part `name` in the same learner process (see `utils.grading.local_object`)."""
        return RemoteObject(self._attn_worker, {"local": name}, {"type": name})

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(obj, nn.Module) works for the learner's modules
        return self._attn_class or RemoteObject

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith(("_repr_", "_ipython_", "_attn_")):
            raise AttributeError(name)
        return self._attn_worker.simple("getattr", self._attn_ref, name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("the grader does not change objects in the learner's process by assignment")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        value = self._attn_worker.call(self._attn_ref, args, kwargs)
        if time.monotonic() - started < REPLAY_S:
            self._attn_worker.remember(self, args, kwargs, value)
        return value

    def _attn_peak_memory(self, *args: Any, **kwargs: Any) -> tuple[Any, int]:
        return self._attn_worker.call(self._attn_ref, args, kwargs, measure=True)

    def __iter__(self) -> Iterator[Any]:
        items = self._attn_worker.simple("iter", self._attn_ref)
        if type(items) is not list:
            raise TypeError(f"{self._attn_remote_type} object is not iterable")
        return iter(items)

    def __len__(self) -> int:
        n = self._attn_worker.simple("len", self._attn_ref)
        if type(n) is not int or n < 0:
            raise TypeError(f"len() of a {self._attn_remote_type} did not give a count")
        return n

    def __getitem__(self, key: Any) -> Any:
        return self._attn_worker.simple("getitem", self._attn_ref, key=key)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<{self._attn_remote_type} from your notebook>"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return other is self
