"""The chapters' tests beside nbval over book/*.ipynb: the chapters are stored without outputs, and the policy of
the root conftest.py (every cell runs; the recorded answers are graded; --kernel-env reaches the kernels only)."""
