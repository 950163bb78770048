"""Fused CPU kernels (Numba) of the hot reference models, for the mapper's volumes.

Each kernel computes exactly what a readable reference model in ``dashraker.models``
computes, in one compiled loop instead of many array passes; the references stay the
specification, and the tests cross-check every kernel against its reference on random,
special and real trace data. Kernels are compiled on first use (and cached on disk),
release the GIL and run on one thread: the mapper's workers are the parallelism. The FPRaker
tile also has a GPU kernel (``fpraker_cuda``, Triton) for ``--device cuda``, checked against the
same reference where a GPU is present.
"""
