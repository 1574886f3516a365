"""The tests, in tiers by what they exercise (tools/testsettings.py lists them; ``make check`` runs the fast part
of tests/lib, ``make test`` everything). A package, like each tier, so that the tiers' conftest.py files and
helpers never shadow one another: import a helper by its full name, ``from tests.lib.tensors import randn``."""
