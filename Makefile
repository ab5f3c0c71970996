# robo-rl: `make train` runs the main job, `make test` the test suite. Both create .venv and install
# what they need (torch pinned to the local CPU wheel torch==2.13.0; on a CUDA machine, install a CUDA
# build of torch into .venv first and it is kept).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robo-rl-installed
TORCH ?= torch==2.13.0

.PHONY: train test bench venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed: installing Debian's python3-venv"; \
	  apt-get update && apt-get install -y --no-install-recommends python3-venv && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

# Main job: train the default Crazyflie hover task (configs/train.yaml) into outputs/<date>/<time>/
# (checkpoints, TensorBoard logs, learning_curve.png, summary.json). Extra Hydra overrides: ARGS="seed=1".
train: $(STAMP)
	$(PY) -m robo_rl.train $(ARGS)

bench: $(STAMP)
	$(PY) bench/sim_speed.py

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

clean:
	rm -rf $(VENV) bench/results .pytest_cache
