"""tools/testrun.py: ``make test``'s stages are reaped in one loop that also counts the CPU time of the processes
left behind by their parents (a browser whose chromedriver exited), so the summary's CPU figure is the whole run's."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
# half a second of CPU, on one line (it goes into a shell command)
BURN = "import time; t = time.process_time(); all(iter(lambda: time.process_time() - t < 0.5, False))"


def script(folder: Path) -> str:
    """The run: a stage whose CPU-bound child is orphaned (the stage exits at once), and one that waits until that
    orphan has been reaped (a zombie still answers ``kill -0``), however slowly a busy machine runs it: a fixed wait
    lost the orphan when make test's other workers kept both cores busy."""
    pid, tmp = (shlex.quote(str(folder / name)) for name in ("orphan.pid", "orphan.pid.tmp"))
    orphaning = f"({shlex.quote(sys.executable)} -c '{BURN}') & echo $! > {tmp} && mv {tmp} {pid}; exit 3"
    waiting = f"until [ -s {pid} ]; do sleep 0.05; done; while kill -0 $(cat {pid}) 2>/dev/null; do sleep 0.05; done"
    return f"""
import testrun
testrun.adopt_orphans()
reaper = testrun.Reaper()
reaper.start(testrun.Stage("orphaning", ["sh", "-c", {orphaning!r}]))
reaper.start(testrun.Stage("waiting", ["sh", "-c", {waiting!r}]))
done = [reaper.next_finished() for _ in range(2)]
print([(stage.name, stage.returncode) for stage in done], reaper.orphans)
print(testrun.summary(2.0, done, reaper.orphans, 1))
"""


def test_stages_are_reaped_with_the_cpu_time_of_their_orphans(tmp_path):
    done = subprocess.run([sys.executable, "-c", script(tmp_path)], cwd=TOOLS, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    first, _, orphaning, _, orphans, total = done.stdout.splitlines()
    assert first.startswith("[('orphaning', 3), ('waiting', 0)]"), done.stdout
    assert float(first.rsplit(" ", 1)[1]) >= 0.45, f"the orphan's 0.5 CPU-s went uncounted: {done.stdout}"
    assert orphaning.strip().startswith("orphaning") and orphaning.endswith("FAILED (exit 3)"), orphaning
    assert orphans.split()[:2] == ["orphans", "(browsers)"] and float(orphans.split()[-3]) >= 0.45, orphans
    assert total.split()[0] == "all" and float(total.split()[-3]) >= float(orphans.split()[-3]), total
