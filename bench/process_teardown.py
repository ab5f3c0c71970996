"""How long after SIGKILL a process is gone, as its peers can see it, and how soon its liveness beacon tells
them: what bounds how soon a robot can know that its learner died.

    .venv/bin/python bench/process_teardown.py [--repeats 5]

The kernel frees a killed process's memory before it closes its files and reports the exit, so the time to
"reaped" (and to any socket of the process closing, and to Ray's owner-death report) grows with what the
process holds: a bare Python, one with torch loaded, one also connected to Ray, and one holding 0.25 / 0.5 /
1 GB of touched memory (a learner's replay buffer and networks). The learner's liveness beacon
(robo_rl_ros.core.liveness, a small process polling the learner's /proc/<pid>/stat) closes its connections as
the process begins to exit. Prints, per case, the median and range of SIGKILL -> the beacon's connection closed
and SIGKILL -> reaped; run it on an idle machine.
"""

from __future__ import annotations

import signal
import socket
import statistics
import subprocess
import sys
import time

from peers import BenchArgumentParser, Positive, Seed

READY = ("from robo_rl_ros.core.liveness import LivenessBeacon; beacon = LivenessBeacon('127.0.0.1'); "
         "print('ready', beacon.address[1], flush=True); time.sleep(600)")
CASES = {
    "python": f"import time; {READY}",
    "torch": f"import time, torch; torch.zeros(1); {READY}",
    "torch + ray.init": ("import time, torch, ray; ray.init(num_cpus=1, include_dashboard=False, "
                         f"logging_level='ERROR'); {READY}"),
    **{f"torch + {gb:g} GB touched": f"import time, torch; x = torch.ones({int(gb * 2 ** 28)}); {READY}"
       for gb in (0.25, 0.5, 1.0)},
}


def teardown_seconds(code: str) -> tuple[float, float]:
    """(SIGKILL to the beacon's connection closed, SIGKILL to reaped) for a process running `code` once it says
    it is ready."""
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        line = process.stdout.readline()
        while not line.startswith("ready"):
            if process.poll() is not None:
                raise SystemExit(f"the process exited ({process.returncode}) before it was ready: {code}")
            line = process.stdout.readline()
        connection = socket.create_connection(("127.0.0.1", int(line.split()[1])), timeout=10.0)
        time.sleep(0.5)
        start = time.monotonic()
        process.send_signal(signal.SIGKILL)
        connection.recv(1)  # returns b"" when the beacon closes it
        closed = time.monotonic() - start
        process.wait()
        return closed, time.monotonic() - start
    finally:
        process.kill()
        process.wait()


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, action=Positive, default=5)
    args = parser.parse_args()
    print(f"median (min-max) of {args.repeats}, ms\n\n| process | SIGKILL -> beacon closed | SIGKILL -> reaped |\n"
          "|---|---|---|")
    for name, code in CASES.items():
        closed, reaped = zip(*(teardown_seconds(code) for _ in range(args.repeats)))
        cells = [f"{statistics.median(t) * 1e3:.1f} ({min(t) * 1e3:.1f}-{max(t) * 1e3:.1f})" for t in (closed, reaped)]
        print(f"| {name} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
