"""Test-session settings: two pytest workers share the two cores, so each uses one thread.

OpenMP's spin-waiting makes oversubscribed cores stall for seconds at every parallel region; with one
intra-op thread per worker (and passive waiting for any child process) the workers never contend.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import torch  # noqa: E402

torch.set_num_threads(1)
