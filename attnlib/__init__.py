"""attnlib: scaled dot-product attention, one step at a time.

The library behind the book *Attention, Step by Step*. Each module is one chapter's concept:

========================  ===================================================
module                    what it computes
========================  ===================================================
``attnlib.device``        which device to run on (CUDA, then MPS, then CPU)
``attnlib.scores``        projections Q = X W_Q, K, V and the scores Q Kᵀ
``attnlib.scaling``       the 1/√Dk scaling, its measurements, QK-norm and soft-capping
``attnlib.softmax``       stable softmax, temperature, causal and padding masks, entropy
``attnlib.attention``     weighted sums and scaled dot-product attention
``attnlib.positions``     position codes: sinusoidal, learned (BERT), rotary (RoPE) and ALiBi
``attnlib.alternatives``  additive and bilinear scores, Nadaraya–Watson regression
``attnlib.multihead``     splitting into heads and ``MultiHeadAttention``
``attnlib.numpy_ops``     the NumPy mirror of the early steps (same names)
``attnlib.causal``        decoding: sliding windows, the KV cache (contiguous, paged), bytes per token
``attnlib.induction``     a tiny attention-only decoder, the repeated-tokens task, induction scores
``attnlib.interpret``     reading attention (norms, rollout); ``attnlib.interventions`` ablates and patches the
                          heads of a running model, ``attnlib.circuits`` reads an attention-only transformer's weights
``attnlib.flash``         memory-efficient attention: tiles and the online softmax, forward and backward
``attnlib.flash_triton``  the same as Triton kernels (compiled on CUDA, Triton's interpreter on a CPU)
``attnlib.flex``          the book's masks and score changes for torch's FlexAttention
``attnlib.io_cost``       bytes moved between HBM and SRAM, arithmetic intensity, the roofline
``attnlib.linear``        linear attention: a kernel feature map, its parallel and recurrent forms
``attnlib.bench``         ``python -m attnlib.bench``: time and memory of every path vs torch
``attnlib.examples``      the running examples ("The cat sat on the mat", ...)
``attnlib.models``        a real pretrained BERT (MiniLM) and its attention recomputed
``attnlib.views``         figures, kernel-free explorers and offline BertViz views
========================  ===================================================

Shape legend (used in every docstring and shape comment):

* ``B``  batch size (there may be further leading batch dimensions, written ``...``)
* ``H``  number of heads (``Hq`` query heads, ``Hkv`` key/value heads in grouped-query attention)
* ``Lq`` query length, ``Lk`` key (and value) length, ``L`` when they are equal
* ``Dk`` query/key width, ``Dv`` value width
* ``D``  model (embedding) width; ``D = H * Dk`` in multi-head attention

Mask convention, everywhere in attnlib (as in ``torch.nn.functional.scaled_dot_product_attention``):
a boolean mask is ``True`` where a query **may attend** to a key; a float mask is **added** to the
scores. Masks broadcast to ``(B, H, Lq, Lk)``. A query whose keys are all masked gets all-zero
weights and a zero output, never NaN.
"""

from attnlib.attention import scaled_dot_product_attention, weighted_sum
from attnlib.device import exact_dtype, get_device
from attnlib.multihead import MultiHeadAttention, merge_heads, split_heads
from attnlib.scaling import scale_scores
from attnlib.scores import QKVProjection, dot_product_scores, project
from attnlib.softmax import apply_mask, causal_mask, padding_mask, softmax

__all__ = [
    "MultiHeadAttention",
    "QKVProjection",
    "apply_mask",
    "causal_mask",
    "dot_product_scores",
    "exact_dtype",
    "get_device",
    "merge_heads",
    "padding_mask",
    "project",
    "scale_scores",
    "scaled_dot_product_attention",
    "softmax",
    "split_heads",
    "weighted_sum",
]
__version__ = "0.1.0"
