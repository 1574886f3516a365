"""The repository's own checks: the README's layout table, one home per fact, and the test plumbing in tools/
(the xdist groups, the settings). Fast; ``make check`` runs them."""
