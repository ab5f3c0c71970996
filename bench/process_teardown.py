"""How long after SIGKILL a process is gone, as its peers can see it: the floor under how soon a robot can
know that its learner died, whatever carries the news (Ray's owner-death report, a closed socket).

    .venv/bin/python bench/process_teardown.py [--repeats 5]

The kernel frees a killed process's memory before it closes its files and reports the exit, so the time
grows with what the process holds: a bare Python, one with torch loaded, one also connected to Ray, and one
holding 0.25 / 0.5 / 1 GB of touched memory (a learner's replay buffer and networks). Prints the median and
range of SIGKILL -> reaped per case; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time

READY = "print('ready', flush=True); time.sleep(600)"
CASES = {
    "python": f"import time; {READY}",
    "torch": f"import time, torch; torch.zeros(1); {READY}",
    "torch + ray.init": ("import time, torch, ray; ray.init(num_cpus=1, include_dashboard=False, "
                         f"logging_level='ERROR'); {READY}"),
    **{f"torch + {gb:g} GB touched": f"import time, torch; x = torch.ones({int(gb * 2 ** 28)}); {READY}"
       for gb in (0.25, 0.5, 1.0)},
}


def teardown_seconds(code: str) -> float:
    """SIGKILL to reaped, for a process running `code` once it says it is ready."""
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        while "ready" not in process.stdout.readline():
            if process.poll() is not None:
                raise SystemExit(f"the process exited ({process.returncode}) before it was ready: {code}")
        time.sleep(0.5)
        start = time.monotonic()
        process.send_signal(signal.SIGKILL)
        process.wait()
        return time.monotonic() - start
    finally:
        process.kill()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    print(f"| process | SIGKILL -> reaped, median (min-max) of {args.repeats} |\n|---|---|")
    for name, code in CASES.items():
        times = [1e3 * teardown_seconds(code) for _ in range(args.repeats)]
        print(f"| {name} | {statistics.median(times):.1f} ms ({min(times):.1f}-{max(times):.1f}) |", flush=True)


if __name__ == "__main__":
    main()
