"""The learner's liveness beacon: how a robot's link learns within milliseconds that its learner has died.

Ray learns of a killed process in 0.1-0.2 s (its raylet notices, the control store is told, the owner's actors
are failed), and a socket of the killed process itself closes no sooner: the kernel frees the process's memory
before its files, 0.1-0.3 s for a learner holding gigabytes. At 50 Hz that is 5-15 ticks of a robot moving on.
What is visible at once is SIGKILL pending (/proc/<pid>/status: the kernel marks it on every thread as it is
sent) and then the process beginning to exit (PF_EXITING in /proc/<pid>/stat). So the learner starts this
beacon, a small process of its own that accepts the links' TCP connections, never writes to them, polls the
learner every `POLL_S` (about 2% of a core), and closes them all and exits as soon as the learner is killed,
begins to exit or is gone; the links read their connection and see it end (core.learner_link). The beacon's
own death closes them too, as fast (it holds almost no memory). It carries nothing: Ray remains the
transport. Where /proc is absent, the learner's end is seen when its process is gone.

`python -m robo_rl_ros.core.liveness <host> <learner pid>` prints "<port> <token>" and serves.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

PF_EXITING = 0x4  # include/linux/sched.h: set as the process enters do_exit
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)  # in /proc/<pid>/status's pending-signal masks
POLL_S = 0.002  # how often the beacon looks at the learner: the most it adds to the links' notice


def exiting(pid: int) -> bool:
    """Whether process `pid` is dying (a SIGKILL pending, which nothing can catch), has begun to exit, or is
    gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            lines = status.read().splitlines()
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: only a process that is gone can be told
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    # the kernel marks SIGKILL pending on every thread as it is sent, before any of them runs again: what a
    # loaded machine's scheduler delays is only the threads' own exit (PF_EXITING below)
    for line in lines:
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
            return True
    fields = text.rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces and parentheses
    return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & PF_EXITING)


def serve(host: str, pid: int) -> None:
    """Accept connections on an ephemeral port of `host` and hold them until `pid` exits; print "<port> <token>"
    first (the token tells this beacon from a later one on the same port)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for the learner: the learner's exit ends this
    try:  # a watchdog that waits for a busy core tells late: ahead of the learner's own work where permitted
        os.nice(-10)
    except OSError:
        pass
    server = socket.create_server((host, 0))
    connections: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connections.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    print(server.getsockname()[1], uuid.uuid4().hex, flush=True)
    while not exiting(pid):
        time.sleep(POLL_S)
    for connection in list(connections):
        connection.close()
    server.close()


class LivenessBeacon:
    """The beacon process watching this process; `address` is (host, port, token) for the links, None if it
    could not start (the links then rely on Ray's deadlines)."""

    def __init__(self, host: str, timeout_s: float = 30.0):
        self.process = subprocess.Popen([sys.executable, "-m", "robo_rl_ros.core.liveness", host, str(os.getpid())],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self.address: tuple[str, int, str] | None = None
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        parts = answer[0].split() if answer else []
        if len(parts) == 2 and parts[0].isdigit():
            self.address = (host, int(parts[0]), parts[1])
        else:
            self.close()

    def close(self) -> None:
        """End the beacon (its links then see the learner gone)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
