"""The engine's sample: the same submissions graded by the engine before issue 22 and by today's, with one seed.

`tests/engine_scores.json` holds the scores the engine of commit 2c4050a (a fresh zygote per notebook, workers
forked, no warm engine) gave these submissions; `tests/test_engine.py` grades them again, warm and with workers
started by fork and by spawn, and asserts the same scores. Recorded again when a test cell gains a check, after the
engine of the day was seen to reproduce the old record on the old test cells (issue 33: three planted mistakes fail
one more visible check each, 01's softmax 1.24 -> 1.19, 02's scaled_dot_product_attention 2.43 -> 2.31, 08's
decoder_mask 0.86 -> 0.75; every other score as recorded at 2c4050a). To record them with another checkout's engine:

    PYTHONPATH=CHECKOUT python tests/engine_sample.py > tests/engine_scores.json   # run from CHECKOUT

Each submission is a solution notebook, or one with a plant of tests/plants_NN.py written into it: for every
notebook its solution, its first catalogued mistake and its first correct variant (written differently).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

SEED = 20261126


def sample(plants) -> list[tuple[str, str, list[dict]]]:
    """(key, notebook, edits) of every submission in the sample; `plants(notebook)` is tests/conftest.plants."""
    from utils import notebooks as nbs

    chosen = []
    for notebook in nbs.assignments():
        module = plants(notebook)
        chosen.append((f"{notebook}/solution", notebook, []))
        mistake = module.MISTAKES[0]
        chosen.append((f"{notebook}/mistake in {mistake['cell']}", notebook, [mistake]))
        variants = getattr(module, "VARIANTS", [])
        if variants:
            chosen.append((f"{notebook}/variant of {variants[0]['cell']}", notebook, [variants[0]]))
    return chosen


def scores(grading) -> dict[str, float]:
    return {e.id: e.score for e in grading.exercises}


def main() -> None:
    root = Path.cwd()
    sys.path.insert(0, str(root))
    from tests.conftest import planted_copy, plants

    try:
        from utils.engine.checking import grade, load_learner_notebook
    except ImportError:  # the engine before utils/ was split
        from utils.checking import grade, load_learner_notebook
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (key, notebook, edits) in enumerate(sample(plants)):
            path = planted_copy(notebook, edits, Path(tmp) / str(i))
            out[key] = scores(grade(load_learner_notebook(path), notebook, seed=SEED))
            print(key, out[key], file=sys.stderr)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
