# robo-rl: `make train` runs the main job, `make test` the test suite. Both create .venv and install
# what they need (torch pinned to the local CPU wheel torch==2.13.0; on a CUDA machine, install a CUDA
# build of torch into .venv first and it is kept).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robo-rl-installed
TORCH ?= torch==2.13.0

.PHONY: train test bench venv clean system-deps

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3 -m venv failed: installing Debian's python3-venv"; \
	  apt-get update && apt-get install -y --no-install-recommends python3-venv && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

# Main job: train the default Crazyflie hover task (configs/train.yaml) into outputs/train-<date>_<time>/
# (checkpoints, best_policy.pt, TensorBoard logs, learning_curve.png, summary.json), then export its best
# policy to <run>/export/ (policy.onnx, policy.json, c/). Extra Hydra overrides: ARGS="seed=1".
TIMESTAMP := $(shell date +%Y-%m-%d_%H-%M-%S)
RUN ?= outputs/train-$(TIMESTAMP)
train: $(STAMP)
	@$(MAKE) --no-print-directory system-deps STRICT=0  # without them the export skips its STM32F405 check
	$(PY) -m robo_rl.train hydra.run.dir=$(RUN) $(ARGS)
	$(PY) -m robo_rl.export run=$(RUN)

bench: $(STAMP)
	$(PY) bench/sim_speed.py

# Debian packages the export tests need: the ARM cross compiler and QEMU (the Crazyflie's STM32F405).
# STRICT=0: a failed installation only warns (make train; the export then records the check as skipped).
SYSTEM_TOOLS := arm-none-eabi-gcc qemu-system-arm make cc
SYSTEM_PACKAGES := gcc gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm make

system-deps:
	@missing=""; for tool in $(SYSTEM_TOOLS); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    $(SYSTEM_PACKAGES) >/dev/null || { echo "could not install $(SYSTEM_PACKAGES)"; [ "$(STRICT)" = 0 ] || exit 1; }; \
	fi

test: $(STAMP) system-deps
	$(PY) -m pytest -n 2 -q

clean:
	rm -rf $(VENV) bench/results .pytest_cache
