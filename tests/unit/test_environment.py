"""The suite gives the same results whatever the caller's environment holds (issue 39): conftest clears
the variables that change what amptui, torch or Python do (CALLERS_VARIABLES, CALLERS_PREFIXES) and
undoes -W/PYTHONWARNINGS in the test process. Checked by running a sample of the suite, one test per
variable that once changed a verdict or could, in a pytest of its own under hostile values."""

from __future__ import annotations

import os
import sys


def test_python_warning_options_are_undone_in_the_test_process():
    """PYTHONWARNINGS/-W acted on this interpreter before any test ran: conftest put Python's defaults back."""
    import warnings

    assert not sys.warnoptions
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # what pytest's per-test capture does: nothing from the caller on top
        warnings.warn("a user warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["a user warning"]
    assert "PYTHONWARNINGS" not in os.environ
