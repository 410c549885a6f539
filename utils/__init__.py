"""Shared code for the attention course: grading, plots, building blocks and the `attn` command.

Notation used everywhere in the course (defined once, here and in notebook 02):

    B        batch size                 h        number of heads
    L        sequence length            Lq, Lk   query / key lengths (cross-attention: Lq != Lk)
    d        a generic width            d_k      query/key width     d_v   value width
    d_model  the model's hidden width (d_model = h * d_k in multi-head attention)

Masks are boolean with True = "may attend".
"""

__version__ = "0.1.0"

import sys as _sys

# jsonschema (which nbformat imports) builds an Earley parser for RFC 3987 IRIs as it is imported, when the optional
# package rfc3987-syntax is installed (Jupyter's own requirements install it): about one second of CPU in every
# process, a learner's kernel included. No schema the course validates (notebooks) uses the "iri" format, so the
# course's processes go without that checker. Where jsonschema is already imported (a Jupyter server), nothing changes.
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type] - None: "import rfc3987_syntax" fails
