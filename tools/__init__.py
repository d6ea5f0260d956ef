"""Campaign runners that are not measurements: ``python -m tools.reliability`` (SIGKILL campaigns, concurrent
writers, the hostile-input table). Not installed; the tests import them (``tools/tests/test_reliability.py``)."""
