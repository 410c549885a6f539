"""Shared code for the attention course: grading, plots, building blocks and the `attn` command.

Notation used everywhere in the course (defined once, here and in notebook 02):

    B        batch size                 h        number of heads
    L        sequence length            Lq, Lk   query / key lengths (cross-attention: Lq != Lk)
    d        a generic width            d_k      query/key width     d_v   value width
    d_model  the model's hidden width (d_model = h * d_k in multi-head attention)

Masks are boolean with True = "may attend".
"""

__version__ = "0.1.0"
