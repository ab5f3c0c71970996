"""Training scaled out on Ray (`runner=ray`): Ray actors collect experience, this process learns.

- `cluster`: joining or starting the Ray cluster, and the runner options it needs checked first.
- `actors`: what runs on Ray workers: `ExperienceActor` (a batched env and a policy copy, sending tagged
  transitions) and `PolicyEvaluator` (the deterministic evaluation, off the learner's critical path).
- `learner`: `RayTrainer`, robo_rl.train's Trainer fed by the actors instead of its own env: replay buffers,
  updates at the local runner's update-to-data ratio, weights to the actors through the object store, and
  the same checkpoints, so `resume=` continues a run whichever runner wrote it.
- `inbox`: batches from actors the run does not start (a robot's), which connect with
  robo_rl_ros.core.learner_link (robot side: it needs Ray, not this package).
"""
