"""benchmarks/ingest_cpu.py counts the CPU of every process of a Ray session: the
daemons that name the session's directory in their command lines and all their
descendants, whatever they are called; nothing outside the session; and a process's
CPU from /proc as the kernel accounts it."""

import contextlib
import os
import signal
import subprocess
import sys
import time

from benchmarks import ingest_cpu
from benchmarks.common import process_cpu

# a "daemon" naming the session directory, which starts a child that names nothing and
# burns some CPU; the grandchild is found by descent, not by name
DAEMON = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                          "while time.process_time() - t < 0.3: pass\\ntime.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_session_processes_are_the_daemons_and_all_their_descendants(tmp_path):
    session = str(tmp_path / "session_2026-12-07_1")
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, session], stdout=subprocess.PIPE, text=True)
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = 0
    try:
        assert daemon.stdout is not None
        child = int(daemon.stdout.readline())
        found = ingest_cpu.session_processes(session)
        assert daemon.pid in found and child in found
        assert outsider.pid not in found and os.getpid() not in found
        assert found[child].startswith("python")
        deadline = time.monotonic() + 10
        while process_cpu(child) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.25 <= process_cpu(child) < 5  # the child's own busy loop, from /proc
    finally:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        for proc in (daemon, outsider):
            proc.kill()
            proc.wait()


def test_a_process_that_is_gone_counts_nothing_and_the_machine_is_busy_over_time():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert process_cpu(proc.pid) == 0.0
    before = ingest_cpu.machine_busy()
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    assert ingest_cpu.machine_busy() - before >= 0.15  # this process's busy loop is in the machine's figure
