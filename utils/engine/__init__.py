"""The grading engine: the learner's code runs in a sandboxed worker, the course's checks in the grader's process.

``protocol`` is the one module both sides import (framing, limits, the requests); ``worker`` serves the requests in
the learner's process; ``remote`` is the grader's handle on a worker and its proxies for the learner's objects;
``sandbox`` starts the zygote that starts workers (forked or spawned, isolated where Linux allows); ``checking``
plans a notebook into steps and grades it (`grade`, and `Engine`, which keeps a zygote warm); ``autograde`` is
nbgrader's side (the `GradeInWorker` preprocessor, and `grade_class` for `attn autograde`). CONTRIBUTING.md,
"The grading engine, on one page", draws which process runs what.
"""
