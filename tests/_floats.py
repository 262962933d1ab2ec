"""How close floats computed now by torch (or BLAS) must be to floats computed elsewhere to count as the same.

A float32 forward pass rounds differently on another CPU family or kernel path: torch picks its vector kernels at run
time (``torch.backends.cpu.get_cpu_capability()``: AVX512, AVX2, ...; ``ATEN_CPU_CAPABILITY`` forces one), and the
order of the reductions changes with them. The embedded sample's probabilities were computed once, on one machine;
recomputed on another, they differ in their last bits. Measured with SmolLM2 on the sample's first rows
(``scripts/tools/check_cpu_capabilities.sh``, docs/testing.md): 4.2e-6 on the AVX-512 path, 1.3e-5 on the AVX2 path.
A test that demands less than that passes on one CPU and fails on another of the same machine kind.

Exact comparisons stay exact only where both sides come from the same process and the same kernel (the same call
run twice, a cache against a recomputation, a value written and read back); each such test says so where it
compares.
"""

from __future__ import annotations

#: Two sets of probabilities from float32 forward passes are "the same probabilities" within this absolute
#: difference: the project's rule (the vLLM parity tests, docs/decisions.md), about 4x the largest difference
#: measured between two CPU kernel paths (1.3e-5), and half of ``builder verify``'s default (1e-4).
SAME_PROBABILITIES = 5e-5
