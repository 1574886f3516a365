"""The chapters' tests beside strict nbval over book/*.ipynb: their float32 runs and the nbval policy of
the root conftest.py (every output the site shows is compared)."""
