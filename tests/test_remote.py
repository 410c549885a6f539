"""Proxies for the learner's objects behave like the objects, and the worker can only ever send data."""

from __future__ import annotations

import nbformat
import pytest
import torch

from utils import course
from utils import notebooks as nbs
from utils.engine.checking import free_names, is_definition, plan
from utils.engine.remote import RemoteObject, Worker, WorkerLost
from utils.engine.sandbox import Zygote
from utils.grading import CheckFailure, load_weights, peak_memory, type_name

LEARNER = '''
import torch
from torch import nn

def double(x):
    return 2 * x

def pair(x):
    return x.sum(), (x, [x.shape, x.dtype])

def in_place(x):
    x += 1
    return x

def same(a, b):
    return torch.tensor(a is b)

class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
    def forward(self, x):
        return self.lin(x).tanh()

def loop():
    while True:
        pass


def nap():
    import time
    time.sleep(3600)

def fail():
    raise ValueError("shapes (3,) and (4,) disagree")

def big(n):
    return torch.ones(n, n).sum()

def noisy(x):
    return torch.nn.functional.dropout(x, 0.5)  # training=True by default: random on every call

CALLS = [0]

def stateful(x):
    CALLS[0] += 1  # not random: the same seed does not repeat it (as memory nothing wrote does not)
    return x * CALLS[0]

class Noisy(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.drop = nn.Dropout(p)
    def forward(self, x):
        return self.drop(x) + torch.rand(()) * (not self.training)

class Cache:
    def __init__(self):
        self.k = torch.zeros(0)
    def update(self, k):
        self.k = torch.cat([self.k, k])
        return self.k
'''


def _learner_worker():
    """A worker that has run LEARNER's cell; closed when the generator is."""
    zygote = Zygote(nbs.ROOT, [])
    w = Worker(zygote)
    reply, _ = w.exchange({"op": "run_cell", "source": LEARNER, "name": "learner"}, None, None)
    assert reply["ok"], reply
    yield w
    w.kill()
    zygote.close()


@pytest.fixture(scope="module")
def worker():
    yield from _learner_worker()


def remote(w, name):
    return RemoteObject(w, {"global": name})


def test_calls_return_plain_data_with_their_structure(worker):
    x = torch.arange(6.0).view(2, 3)
    torch.testing.assert_close(remote(worker, "double")(x), 2 * x)
    total, (back, (shape, dtype)) = remote(worker, "pair")(x)
    assert type(back) is torch.Tensor and torch.equal(back, x) and float(total) == 15.0
    assert tuple(shape) == (2, 3) and dtype == torch.float32


def test_the_same_tensor_twice_arrives_as_one_object(worker):
    x = torch.ones(2)
    assert bool(remote(worker, "same")(x, x)) and not bool(remote(worker, "same")(x, x.clone()))


def test_an_in_place_edit_fails_the_call_and_leaves_the_graders_tensor_alone(worker):
    x = torch.zeros(3)
    with pytest.raises(CheckFailure, match="changed 1 of its input tensors in place"):
        remote(worker, "in_place")(x)
    assert torch.equal(x, torch.zeros(3))


def test_modules_load_weights_and_pass_gradients_back(worker):
    module = remote(worker, "Scale")(4)
    assert isinstance(module, torch.nn.Module) and isinstance(module.lin, torch.nn.Linear)
    assert type_name(module) == "Scale" and module.lin.in_features == 4
    weights = {"lin.weight": torch.randn(4, 4), "lin.bias": torch.randn(4)}
    load_weights(module, weights, "lin = nn.Linear(4, 4)")
    x = torch.randn(3, 4, requires_grad=True)
    out = module(x)
    expected = torch.nn.functional.linear(x, weights["lin.weight"], weights["lin.bias"]).tanh()
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    torch.nn.functional.linear(x_ref, weights["lin.weight"], weights["lin.bias"]).tanh().square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    assert module.lin.weight.grad is not None and module.lin.weight.grad.abs().sum() > 0
    assert len(list(module.parameters())) == 2


def test_learner_exceptions_come_back_as_exceptions_checks_can_expect(worker):
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(4,\) disagree") as info:
        remote(worker, "fail")()
    where = info.value.learner_where  # data: the function, the line and its code
    assert where.function == "fail" and where.line and "disagree" in where.code
    worker.names["nowhere"] = "`nowhere` is not defined: your notebook has no answer cell for it"
    with pytest.raises(NameError, match="no answer cell"):
        remote(worker, "nowhere")(1)


def test_peak_memory_is_read_from_outside_the_worker(worker):
    _, small = peak_memory(remote(worker, "big"), 16)
    _, large = peak_memory(remote(worker, "big"), 4096)  # a 64 MiB tensor
    assert small < 16 * 2**20 < 60 * 2**20 < large


@pytest.mark.parametrize("call, seconds, reason", [("loop", 1.0, "cpu"), ("nap", 0.5, "idle")])
def test_a_worker_past_its_budget_is_killed_for_the_right_reason(worker, call, seconds, reason):
    """A loop spends the budget's CPU seconds; code that waits instead spends as many seconds waiting (and a busy
    machine, which stretches the wall clock, neither: tests/test_budgets.py)."""
    import time

    from utils.engine.remote import WALL_FACTOR

    w = Worker(worker.zygote)
    w.exchange({"op": "run_cell", "source": LEARNER, "name": "learner"}, None, None)
    w.deadline = w.budget(seconds)
    started = time.monotonic()
    with pytest.raises(WorkerLost, match=f"^{reason}$"):
        remote(w, call)()
    took = time.monotonic() - started
    assert not w.alive
    cpu, _ = w.deadline.used()
    if reason == "cpu":
        assert seconds <= cpu < seconds + 1.0 and took < seconds * WALL_FACTOR, (cpu, took)
    else:
        assert seconds <= took < seconds + 1.0 and cpu < seconds, (cpu, took)


def test_plan_runs_the_course_cells_and_grades_course_tests_in_the_course_order():
    source = nbs.read(nbs.solution_path("01_attention_intuition"))
    learner = nbs.read(nbs.release_path("01_attention_intuition"))
    cells = {nbs.nbgrader_meta(c).get("grade_id"): c for c in learner.cells}
    test = cells["test_softmax"]
    learner.cells.remove(test)
    learner.cells.insert(0, test)  # moved to the top
    twin = nbformat.v4.new_code_cell("1000.0", metadata={"nbgrader": {**test.metadata["nbgrader"], "points": 1000}})
    learner.cells.insert(5, twin)  # a duplicate worth 1000 points
    learner.cells.remove(cells["test_attention_pool"])  # deleted
    steps = plan(source, learner)
    tests = [(s.grade_id, s.points) for s in steps if s.kind == "test"]
    assert tests == [(f"test_{e.name}", e.points) for e in course.notebook("01_attention_intuition").exercises]
    assert ("test_softmax", 3.0) in tests and ("test_attention_pool", 3.0) in tests  # each once, at its own points
    order = [s.grade_id for s in steps if s.grade_id]
    assert order.index("softmax") < order.index("test_softmax") < order.index("attention_pool")
    assert any(s.origin == "learner" and s.source == "1000.0" for s in steps)
    assert "cost_timing" not in order, "cells tagged slow are not run while grading"


def test_test_cell_names_and_definition_cells():
    assert free_names("check = Checker('x', 1)\nwith check('a'):\n    y = softmax(x0)\n") == {"Checker", "softmax", "x0"}
    assert is_definition("import torch\ndef f():\n    pass\nclass A:\n    pass\n")
    assert not is_definition("x = f()") and not is_definition("def f(:")


@pytest.fixture
def fresh_worker():
    """A worker of its own: the tests above end theirs on purpose (a loop, an exit)."""
    yield from _learner_worker()


def test_a_result_that_varies_between_identical_calls_is_found_and_a_deterministic_one_is_not(fresh_worker):
    worker = fresh_worker
    x = torch.ones(200)
    out = remote(worker, "noisy")(x)
    assert 0 < worker.varies(out) <= 200 and worker.varied_by == "random"
    assert worker.varies(remote(worker, "stateful")(x)) == 200 and worker.varied_by == "unseeded"
    assert worker.varies(remote(worker, "double")(x)) == 0 and worker.varied_by is None
    assert worker.varies(torch.ones(3)) is None  # not the result of a recent call


def test_only_calls_that_must_be_deterministic_are_made_again(fresh_worker):
    worker = fresh_worker
    x = torch.ones(200)
    module = remote(worker, "Noisy")(0.5)
    assert worker.varies(module(x)) is None  # train mode with dropout: random, rightly; not asked again
    module.eval()
    assert worker.varies(module(x)) > 0  # eval mode: must be deterministic, and is not
    cache = remote(worker, "Cache")()
    first = cache.update(torch.ones(2))
    assert worker.varies(first) is None and tuple(cache.k.shape) == (2,)  # a method is never called twice


def test_the_checker_diagnoses_a_random_output_while_grading(fresh_worker):
    worker = fresh_worker
    from utils.engine.checking import GradingContext
    from utils.grading import Checker

    check = Checker("noisy", 1, context=GradingContext(
        seed=0, hidden=None, worker=worker, budget=worker.budget(10), outer=worker.budget(60)))
    x = torch.randn(50)
    with check("deterministic"):
        check.close(remote(worker, "noisy")(x), x, "output")
    with check("only wrong"):
        check.close(remote(worker, "double")(x), x, "output")
    messages = [c["message"] for c in check.score().report["checks"]]
    assert "changes from one call to the next with the same inputs" in messages[0]
    assert "changes from one call" not in messages[1] and "multiplied by 2" in messages[1]
