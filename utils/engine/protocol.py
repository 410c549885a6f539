"""What crosses between the grader and the learner's worker: the framing, the limits and the messages.

Both sides import this module and nothing of each other: the worker (``utils.engine.worker``, in the learner's process)
never imports the grader's modules, and the grader (``utils.engine.remote``) never imports the worker's.

A message is a frame header (two lengths), a JSON object, and the tensors as one safetensors blob, so decoding it
runs no code of the sender's (no pickle). The grader sends requests, one at a time; the worker answers each with
``{"ok": true, ...}`` or ``{"ok": false, "error": {...}}``. While it runs the learner's code it may first send
``{"callback": NAME, "args": ..., "kwargs": ...}`` (the learner's code called a part of an earlier exercise that the
grader stands in for), which the grader answers with ``{"ok": true, "value": ...}`` before the reply arrives.

=============  ==================================================================================================
request        what the worker does
=============  ==================================================================================================
``hello``      answers when it is ready
``run_cell``   runs one cell's ``source`` (a course cell or the learner's) in the learner's namespace
``reset``      starts an exercise afresh: forgets the objects the grader holds references to
``call``       calls a learner object (``ref``) with ``args``/``kwargs`` under the grader's ``seed``
``backward``   the gradients of a recorded ``call`` for the grader's ``grads``
``getattr``    an attribute of a learner object; ``iter``, ``len`` and ``getitem`` likewise
``substitute`` while a check runs, the names listed stand for grader parts (``call_back`` reaches them)
``restore``    puts the learner's own names back
=============  ==================================================================================================
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

import torch

#: The requests the worker serves (the table above).
REQUESTS = ("hello", "run_cell", "reset", "call", "backward", "getattr", "iter", "len", "getitem", "substitute",
            "restore")
FRAME = struct.Struct("!IQ")  # header length, payload length
MAX_HEADER = 64 * 2**20
MAX_PAYLOAD = 2**30
MAX_ITEMS = 100_000  # elements of a list, tuple, dict or iterator sent in one message
MAX_TEXT = 2_000  # characters of any string that comes back (error messages, reprs)


# -- framing ----------------------------------------------------------------------------------------------
class ProtocolError(Exception):
    """A message that does not follow the protocol (too big, not JSON, wrong fields)."""


def pack(header: dict[str, Any], tensors: dict[str, torch.Tensor] | None = None) -> bytes:
    """One framed message: the JSON header and the tensors as one safetensors blob."""
    from safetensors.torch import save

    payload = save(tensors) if tensors else b""
    head = json.dumps(header).encode()
    return FRAME.pack(len(head), len(payload)) + head + payload


def unpack_tensors(payload: bytes) -> dict[str, torch.Tensor]:
    """Tensors from a safetensors blob: plain CPU tensors, whatever the sender held."""
    from safetensors.torch import load

    if not payload:
        return {}
    try:
        tensors = load(payload)
    except Exception as exc:  # noqa: BLE001 - any damage is the sender's problem
        raise ProtocolError(f"unreadable tensor data ({type(exc).__name__})") from None
    return {k: v for k, v in tensors.items() if type(v) is torch.Tensor}


def _wait(deadline: Any, waited: float) -> float:
    """Seconds to wait for the other side before asking `deadline` again: a time.monotonic() instant, or an object
    whose `wait(waited)` says (`utils.engine.remote.Budget`; `waited`: the seconds just spent with nothing arriving);
    TimeoutError (its reason as the message) once it is spent."""
    if hasattr(deadline, "wait"):
        return deadline.wait(waited)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("wall")
    return remaining


def read_exactly(sock: socket.socket, n: int, deadline: Any = None) -> bytes:
    chunks, got = [], 0
    while got < n:
        waited = 0.0
        while deadline is not None:
            timeout = _wait(deadline, waited)
            started = time.monotonic()
            if select.select([sock], [], [], timeout)[0]:
                break
            waited = time.monotonic() - started
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, deadline: Any = None) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read one framed message (TimeoutError once `deadline` is spent, EOFError when the other side is gone)."""
    head_len, payload_len = FRAME.unpack(read_exactly(sock, FRAME.size, deadline))
    if head_len > MAX_HEADER or payload_len > MAX_PAYLOAD:
        raise ProtocolError(f"a message of {head_len + payload_len} bytes is over the limit")
    try:
        header = json.loads(read_exactly(sock, head_len, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ProtocolError("a message header that is not JSON") from None
    if not isinstance(header, dict):
        raise ProtocolError("a message header that is not a JSON object")
    return header, unpack_tensors(read_exactly(sock, payload_len, deadline))
