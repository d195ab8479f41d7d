"""Started any way, it still stops (issue 55). A shell without job control (`amptui run ... &` in a
script, `ssh box 'amptui ab ... &'`) starts its background commands with SIGINT ignored, and Python
then installs no handler: amptui's drivers would train through the SIGINT that is their "stop
gracefully". Each test starts amptui exactly that way (`trap '' INT; exec ...`, which is what `&`
does to the signal) and stops it."""

from __future__ import annotations

import signal

from amptui.jobs.spawn import hear_interrupts


def test_an_ignored_sigint_is_taken_back_and_a_handler_someone_set_is_left_alone():
    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        hear_interrupts()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

        def own(signum, frame):
            pass

        signal.signal(signal.SIGINT, own)
        hear_interrupts()
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, before)
