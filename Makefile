# robo-rl: `make train` runs the main job, `make test` the test suite. Both create .venv and install
# what they need (torch pinned to the local CPU wheel torch==2.13.0; on a CUDA machine, install a CUDA
# build of torch into .venv first and it is kept). pip --no-compile: Python compiles what is imported, when it
# is first imported, instead of every file of every package at install (torch alone: 59 s -> 23 s here).
# pip installs torch (it alone reads this machine's pip configuration, where the local wheel is) and uv, which
# installs what make train needs besides, fetching and unpacking in parallel: 7.5 s instead of pip's 21-24 s here
# (uv itself adds 2 s), and the ROS environment's pinned packages (5.5 s instead of about 40 s); where uv fails (a
# proxy whose certificate only pip's configuration names), pip does. The extras stay with pip: uv's resolver spent
# 42 s on hydra-ray-launcher's dependencies and settled on boto3 0.0.3.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# make train and make specialists install what training and export need (CORE_STAMP), make venv, make test and
# make bench every extra of pyproject.toml besides (Ray, Minari, pytest: STAMP), 27 s more here
CORE_STAMP := $(VENV)/.robo-rl-core-installed
STAMP := $(VENV)/.robo-rl-installed
TORCH ?= torch==2.13.0
UV := uv==0.13.9
# Python's bytecode cache for every command run from here, in the environment's folder: where the environment
# sets PYTHONDONTWRITEBYTECODE (this VM does) every process compiled the sources it imports again, about
# 3 s of torch and Hydra for each command and for each command a test starts; kept under .venv, the cache writes
# nothing into the checkout's own folders, which that setting keeps clean
PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache
export PYTHONPYCACHEPREFIX
unexport PYTHONDONTWRITEBYTECODE

# ROS 2: a second environment with Jazzy's rclpy and message wheels from PyPI (they install a
# .pth that re-executes every Python started there, so they stay out of .venv), colcon, cyclonedds and
# MCAP for the tests, the simulator (torch, MuJoCo) for the sim bridge, which is a ROS node, and the
# learner's own Ray version for robot_actor_node (a Ray cluster takes only its own version).
ROS_VENV ?= .venv-ros
ROS_PY := $(ROS_VENV)/bin/python
ROS_STAMP := $(ROS_VENV)/.robo-rl-ros-installed
ROS_PACKAGES := "ros-jazzy-rclpy[fastrtps]==7.1.6" ros-jazzy-std-msgs==5.3.6 ros-jazzy-std-srvs==5.3.6 \
  ros-jazzy-geometry-msgs==5.3.6 ros-jazzy-sensor-msgs==5.3.6 ros-jazzy-trajectory-msgs==5.3.6 \
  ros-jazzy-nav-msgs==5.3.6 ros-jazzy-rosgraph-msgs==2.0.3 colcon-common-extensions==0.3.0 \
  cyclonedds==11.0.1 mcap-ros2-support==0.6.0 numpy==2.4.6 onnx==1.23.2 onnxruntime==1.31.1 mujoco==4.0.0 \
  gymnasium==1.4.0 pytest==9.2.0 pytest-xdist==3.8.0 setuptools==79.0.1

.PHONY: train test bench specialists venv clean system-deps ros-venv ros-test ros-system-deps

# $(call check_folder,NAME,HINT): a recipe line that stops (status 2) where the folder variable NAME is empty (RUN= put
# the teachers, SPECIALISTS= every specialist, at the root of the disk) or holds a space (make splits it into paths)
check_folder = [ -n "$(strip $($(1)))" ] || { echo "$(1)= is empty; $(2)" >&2; exit 2; }; \
  case "$($(1))" in *" "*) echo "$(1)=$($(1)) holds a space, which make splits into several paths; give a path without spaces" >&2; \
  exit 2;; esac

# $(call make_venv,FOLDER): a virtual environment from PYTHON; where its venv module is missing (Debian's python3
# without python3-venv), that package is installed. A PYTHON that is no Python 3.10+ is refused first: a typo ran
# apt-get as root.
make_venv = [ "$$("$(PYTHON)" -c 'import sys; print(sys.version_info >= (3, 10))' 2>/dev/null)" = True ] || { \
  echo "PYTHON=$(PYTHON) is not a Python 3.10 or newer on PATH; give one, e.g. PYTHON=python3" >&2; exit 2; }; \
  "$(PYTHON)" -m venv $(1) 2>/dev/null || { \
  echo "$(PYTHON) -m venv failed: installing Debian's python3-venv"; \
  apt-get update && apt-get install -y --no-install-recommends python3-venv && "$(PYTHON)" -m venv $(1); }

# $(call uv_or_pip,PYTHON,REQUIREMENTS): REQUIREMENTS into PYTHON's environment by uv, by pip where uv fails
uv_or_pip = $(VENV)/bin/uv pip install --quiet --python $(1) $(2) || { echo "uv could not install them: pip does"; \
  $(1) -m pip install --quiet --disable-pip-version-check --no-compile $(2); }

venv: $(STAMP)

$(CORE_STAMP): pyproject.toml Makefile
	@$(call make_venv,$(VENV))
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile "$(TORCH)" $(UV)
	$(call uv_or_pip,$(PY),-e .)
	@touch $(CORE_STAMP)

$(STAMP): $(CORE_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -e ".[dev]"
	@touch $(STAMP)

# Main job: the Crazyflie-family hover policy (README, section 3) into
# outputs/train-<date>_<time>/, exported to <run>/export/ (policy.onnx, policy.json, c/): a student
# (python -m robo_rl.distill teacher=expert) of the model-based expert (sim/quadrotor/expert.py, which reads each
# simulated vehicle's true state, parameters and queued commands and needs no training) on make train's vehicle
# family (+experiment=hover_family: vehicles around crazyflie_l2f_paper, rotor lag up to 165/300 ms scaled from 0,
# 0-3 steps of latency, wind), in <run> itself (checkpoints, best_policy.pt, TensorBoard logs, learning_curve.png,
# summary.json): about 5 min here with the environment's setup from a fresh clone.
# SEED=1 for another training seed. TASK=reach or TASK=figure_eight distills a student of that task.
# TEACHER=rl takes the earlier recipe of trained teachers instead (13-15 min; bench/RESULTS.md, sessions 14-41):
#   1. two teachers side by side, one core each, in <run>/teachers/: the family (+experiment=hover_family, 2.5M env
#      steps) and the same family without rotor lag (+experiment=hover_family_fast_rotors), which the first cannot fly;
#   2. their student in <run>: the vehicles with rotors under 20 ms are labelled by the fast-rotor teacher, the others
#      by the family teacher. TEACHERS=<run>/teachers reuses the teachers of an earlier run instead of training them
#      (a student in 1-2 min), and POOL below adds per-vehicle teachers; both imply TEACHER=rl.
# The single-vehicle recipe (2-3 min): .venv/bin/python -m robo_rl.train
TIMESTAMP := $(shell date +%Y-%m-%d_%H-%M-%S)
# SEED is checked before anything is written: a bad one used to leave a teacher's log behind
check_seed = case "$(SEED)" in ''|*[!0-9]*|???????????*) false;; *) [ "$(SEED)" -le 4294967295 ];; esac || { \
  echo "SEED=$(SEED) must be a whole number from 0 to 4294967295" >&2; exit 2; }
RUN ?= outputs/train-$(TIMESTAMP)
SEED ?= 0
TASK ?= hover
TEACHER ?= expert
TEACHERS ?=
TEACHER_DIR := $(if $(TEACHERS),$(TEACHERS),$(RUN)/teachers)
# each teacher keeps its latest checkpoint only (replay buffer included, 0.86 GB each; resume=<teacher run> goes on
# from it): with the default three, a run took 5.1 GB
TEACHER_CHECKPOINTS := checkpoint.keep=1
STUDENT_VEHICLES := 'env_overrides={randomization: {motor_tau_scale: [0.0, 1.0]}}'
# POOL=1 adds per-vehicle teachers (README, "per-vehicle teachers where the family teachers fail"): after the two
# teachers, a specialist on each of 120 vehicles drawn from the student's distribution at 20-30 ms of latency: 72
# plain draws, then POOL_FOCUS's 24 light, slow-rotor ones at 20 ms and 24 at 30 ms with thrust-to-weight 2.4-3.0,
# where the plain draw holds few (python -m robo_rl.teacher_pool, about 2 h 20 min on this 2-core VM;
# POOL_ARGS=ray_address=auto trains them as Ray tasks on a cluster) into <teachers>/pool, which labels half the
# student's envs. A rerun with TEACHERS=<run>/teachers reuses that pool and trains only its missing members; a
# pool of 72 grows by the 48. POOL=<folder> names the pool's folder instead; POOL_FOCUS= keeps the 72.
POOL ?=
POOL_ARGS ?=
POOL_FOCUS ?= 'focus=[{size: 24, where: {latency_steps: [2, 2], thrust_to_weight: [1.4, 2.4], motor_tau_rise: [0.08, 1.0], motor_tau_fall: [0.08, 1.0]}}, {size: 24, where: {latency_steps: [3, 3], thrust_to_weight: [2.4, 3.0]}}]'
POOL_DIR := $(if $(filter 1,$(POOL)),$(TEACHER_DIR)/pool,$(filter-out 0,$(POOL)))
# the pool is drawn from the student's vehicles, and its specialists observe the position error limited as the
# student does (0.15 m). Its student takes 400 regression steps per iteration instead of 200, which lifts the
# light Crazyflies at 20 ms from moderate starts (session 26), and the family teachers label only rollouts from
# moderate starts, which they fly well: from learning-to-fly's starts the pool's members teach better
# (bench/RESULTS.md, session 27)
FAMILY_STARTS := 'family_starts={position_range: 0.2, max_tilt_deg: 30.0, velocity_range: 0.5, angular_velocity_range: 0.5, hover_fraction: 0.0}'
POOL_STUDENT := $(if $(POOL_DIR),teacher_pool=$(POOL_DIR) teacher_pool_latency_from=2 num_envs=1600 \
  distillation.updates_per_iteration=400 $(FAMILY_STARTS))
# the expert's student (bench/RESULTS.md, sessions 42-43, 46-49 and 52): 170 DAgger iterations (17.4M env steps) instead
# of distill's 40; an 88-88 actor that observes its last 16 velocities and body rates instead of the experiment's
# 64-64 and 8, within the STM32F405's budget (59k instructions per inference, 92 KB of policy flash); rollout
# episodes of 2.5 s, so that the steps after a start weigh more in the dataset. The AI deck at 30 ms from
# learning-to-fly starts (1,000 episodes; its specialist 35%) on seeds 1 / 2 / 3: 36 / 40 / 39% against 31 / 28 / 29%
# with 130 iterations; with 170 iterations of 150 regression steps instead of 200, 34 / 28% on seeds 1 / 2. Evaluated
# every 10 iterations (every 5 in session 52, 2 before: the same student, an evaluation takes 0.24 s)
EXPERT_STUDENT := iterations=170 eval.interval_iterations=10 'student.actor_hidden=[88,88]' rollout_episode_seconds=2.5 \
  'env_overrides={randomization: {motor_tau_scale: [0.0, 1.0]}, state_history: 16}'
# TASK=figure_eight keeps session 42's student (8 past states, a 96-96 actor, its task's own episodes): its success
# is judged over a 6 s window that 2.5 s rollout episodes never reach, and with 16 past states and an 88-88 actor
# one of three seeds evaluated at 89% against 92-93% (bench/RESULTS.md, session 43)
FIGURE_EIGHT_STUDENT := iterations=60 'student.actor_hidden=[96,96]' $(STUDENT_VEHICLES)
# more robo_rl.distill options for the student, after the recipe's (an option given twice: the later wins), e.g.
# DISTILL_ARGS='checkpoint_every_evaluation=true checkpoint_keep=1000' (bench/time_to_suite.py: the time to the
# first student that meets the robustness suite); the run's folder is RUN's, not a hydra. option's
DISTILL_ARGS ?=
export DISTILL_ARGS
# the trained-teacher recipe where asked for or implied by TEACHERS= or POOL=
RECIPE := $(if $(or $(TEACHERS),$(POOL_DIR),$(filter rl,$(TEACHER))),rl,expert)
train: $(CORE_STAMP)
	@$(PY) -c "import sys; from sim.quadrotor.tasks import TASKS; known = '$(TASK)' in TASKS; \
	  known or print('TASK=$(TASK) is not a quadrotor task; known: ' + ', '.join(TASKS), file=sys.stderr); sys.exit(0 if known else 2)"
	@$(call check_seed)
	@# read from the environment, not pasted into these lines, whose own shell a quote in it would break; parsed (-n:
	@# not run) as the distill line below will paste it
	@sh -n -c ": $$DISTILL_ARGS" 2>/dev/null || { echo "DISTILL_ARGS=$$DISTILL_ARGS: the shell cannot read it" \
	  "(a quote not closed?); quote each option whole, e.g. DISTILL_ARGS=\"'student.actor_hidden=[64,64]'\"" >&2; exit 2; }
	@case " $$DISTILL_ARGS" in *" hydra."*|*" +hydra."*|*" ++hydra."*|*[\"\']hydra.*|*[\"\']+hydra.*) \
	  echo "DISTILL_ARGS=$$DISTILL_ARGS: give the run's folder as RUN=<folder>, not as a hydra. option" >&2; exit 2;; esac
	@case "$(TEACHER)" in expert|rl) ;; *) \
	  echo "TEACHER=$(TEACHER): give TEACHER=expert (the model-based expert, the default) or TEACHER=rl (trained teachers)" >&2; exit 2;; esac
	@$(call check_folder,RUN,give the run's folder or leave RUN out for outputs/train-<date>_<time>)
	@# make splits a path at its spaces: `mkdir -p $(RUN)/teachers` made folders beside the run and a teacher started
	@for given in "TEACHERS=$(TEACHERS)" "POOL=$(POOL)"; do case "$$given" in *" "*) \
	  echo "$$given holds a space, which make splits into several paths; give a path without spaces" >&2; exit 2;; esac; done
	@case "$(POOL)" in yes|no|true|false|on|off|y|n) \
	  echo "POOL=$(POOL): give POOL=1 (the pool in <teachers>/pool), POOL=0 or nothing (none), or POOL=<folder>" >&2; exit 2;; esac
	@# the teachers are trained into RUN: an earlier run there would get its logs overwritten and new teachers mixed in
	@if [ -z "$(TEACHERS)" ] && [ -e "$(RUN)" ] && [ -n "$$(ls -A "$(RUN)" 2>/dev/null || echo file)" ]; then \
	  echo "RUN=$(RUN) already exists; give a new folder$$([ -d "$(RUN)/teachers" ] && echo " (TEACHERS=$(RUN)/teachers reuses its teachers)")" >&2; \
	  exit 2; fi
	@for t in $(if $(TEACHERS),family fast_rotors); do [ -f "$(TEACHERS)/$$t/config.yaml" ] || { \
	  echo "TEACHERS=$(TEACHERS) holds no $$t teacher run ($(TEACHERS)/$$t/config.yaml): give the teachers folder of a make train run" >&2; exit 2; }; done
	@$(MAKE) --no-print-directory system-deps STRICT=0  # without them the export skips its STM32F405 check
	@if [ "$(RECIPE)" = rl ] && [ -z "$(TEACHERS)" ]; then \
	  mkdir -p $(RUN)/teachers; \
	  echo "training the fast-rotor teacher in the background: $(RUN)/teachers/fast_rotors.log"; \
	  $(PY) -m robo_rl.train +experiment=hover_family_fast_rotors seed=$(SEED) torch_threads=1 $(TEACHER_CHECKPOINTS) \
	    logging.progress_bar=false hydra.run.dir=$(RUN)/teachers/fast_rotors > $(RUN)/teachers/fast_rotors.log 2>&1 & \
	  fast=$$!; trap 'kill $$fast 2>/dev/null' INT TERM; \
	  $(PY) -m robo_rl.train +experiment=hover_family seed=$(SEED) torch_threads=1 $(TEACHER_CHECKPOINTS) \
	    hydra.run.dir=$(RUN)/teachers/family || { kill $$fast 2>/dev/null; exit 1; }; \
	  echo "waiting for the fast-rotor teacher"; \
	  wait $$fast || { echo "the fast-rotor teacher failed: see $(RUN)/teachers/fast_rotors.log" >&2; exit 1; }; \
	fi
	@if [ -n "$(POOL_DIR)" ]; then \
	  echo "training the per-vehicle teacher pool: $(POOL_DIR)"; \
	  $(PY) -m robo_rl.teacher_pool run=$(TEACHER_DIR)/family $(STUDENT_VEHICLES) out=$(POOL_DIR) $(POOL_FOCUS) $(POOL_ARGS) || exit 1; \
	fi
	$(PY) -m robo_rl.distill $(if $(filter rl,$(RECIPE)),teacher=$(TEACHER_DIR)/family checkpoint=best \
	  fast_rotor_teacher=$(TEACHER_DIR)/fast_rotors $(POOL_STUDENT) $(STUDENT_VEHICLES),teacher=expert \
	  $(if $(filter figure_eight,$(TASK)),$(FIGURE_EIGHT_STUDENT),$(EXPERT_STUDENT))) \
	  task=$(TASK) difficulty=1.0 seed=$(SEED) hydra.run.dir=$(RUN) $(DISTILL_ARGS)
	$(PY) -m robo_rl.export run=$(RUN)

# The ceilings the robustness suite prints (python -m robo_rl.robustness run=<run> specialists_dir=outputs/specialists):
# per named vehicle, a hover policy trained on it alone (configs/experiment/specialist.yaml) across the suite's
# latencies into outputs/specialists/<vehicle>, and one per latency in SPECIALIST_LATENCIES into
# outputs/specialists/<vehicle>-latency<k> (one trained at 30 ms flies it where the first flies none); each cell's
# ceiling is the best of them. 500k env steps each, 2-4 min here; SPECIALIST_LATENCIES= for the first kind only.
# Run again after a stop, it keeps each specialist that finished (summary.json) and resumes one that has checkpoints,
# if it was trained with the same ARGS (else it stops: delete the specialist, or give its ARGS). SPECIALISTS=<folder>
# trains them there instead.
SPECIALIST_LATENCIES ?= 0 1 2 3
SPECIALISTS ?= outputs/specialists
specialists: $(CORE_STAMP)
	@$(call check_folder,SPECIALISTS,give the folder to train the specialists into or leave SPECIALISTS out for outputs/specialists)
	@for latency in $(SPECIALIST_LATENCIES); do case "$$latency" in 0|1|2|3) ;; *) \
	  echo "SPECIALIST_LATENCIES=$(SPECIALIST_LATENCIES): each must be one of the suite's latencies 0 1 2 3, got $$latency" >&2; \
	  exit 2;; esac; done
	@specialist() { dir=$(SPECIALISTS)/$$1; shift; \
	  if [ -f $$dir/summary.json ] || [ -d $$dir/checkpoints ]; then \
	    $(PY) -c "import sys; from robo_rl.checkpoint import check_trained_with; from robo_rl.cli import command; \
	      command(lambda a: check_trained_with(a[0], a[1:]))(sys.argv[1:])" $$dir +experiment=specialist "$$@" $(ARGS) || exit 2; fi; \
	  if [ -f $$dir/summary.json ]; then echo "$$dir: trained, kept"; \
	  elif [ -d $$dir/checkpoints ]; then echo "$$dir: resuming"; $(PY) -m robo_rl.train resume=$$dir; \
	  else $(PY) -m robo_rl.train +experiment=specialist "$$@" hydra.run.dir=$$dir $(ARGS); fi; }; \
	for vehicle in $$($(PY) -c "from sim.quadrotor.model import VEHICLES; print(*VEHICLES)"); do \
	  specialist $$vehicle +env.overrides.vehicle=$$vehicle || exit 1; \
	  for latency in $(SPECIALIST_LATENCIES); do \
	    specialist $$vehicle-latency$$latency +env.overrides.vehicle=$$vehicle \
	      "env.overrides.randomization.latency_steps=[$$latency,$$latency]" || exit 1; done; done

bench: $(STAMP)
	$(PY) bench/sim_speed.py

# Debian packages the tests need: g++ (torch.compile of the SAC update, the native quadrotor step), the
# ARM cross compiler and QEMU (the Crazyflie's STM32F405), and Mesa's EGL (offscreen rollout videos without a display) and OSMesa
# (bench/arm_speed.py's gym-hil peer).
# STRICT=0: a failed installation only warns (make train; the export then records the check as skipped).
SYSTEM_TOOLS := arm-none-eabi-gcc qemu-system-arm make cc g++
SYSTEM_LIBS := libEGL_mesa.so.0 libOSMesa.so.8
SYSTEM_PACKAGES := gcc g++ gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm make \
  libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6

system-deps:
	@missing=""; for tool in $(SYSTEM_TOOLS); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	for lib in $(SYSTEM_LIBS); do ldconfig -p | grep -q "$$lib" || missing="$$missing $$lib"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    $(SYSTEM_PACKAGES) >/dev/null || { echo "could not install $(SYSTEM_PACKAGES)"; [ "$(STRICT)" = 0 ] || exit 1; }; \
	fi

test: $(STAMP) system-deps $(ROS_STAMP) ros-system-deps
	$(PY) -m pytest -n 2 --dist loadgroup -q --durations=25  # the slowest, for keeping make test near 15 min
	@$(MAKE) --no-print-directory ros-test

ros-venv: $(ROS_STAMP)

$(ROS_STAMP): pyproject.toml Makefile $(STAMP)
	@$(call make_venv,$(ROS_VENV))
	$(ROS_PY) -m pip install --quiet --disable-pip-version-check --no-compile "$(TORCH)"
	$(call uv_or_pip,$(ROS_PY),$(ROS_PACKAGES) "ray==$$($(PY) -c 'import ray; print(ray.__version__)')")
	$(call uv_or_pip,$(ROS_PY),--no-deps -e .)
	@touch $(ROS_STAMP)

# unshare (util-linux) and ip (iproute2) put the DDS tests in a loopback-only network namespace
ros-system-deps:
	@command -v ip >/dev/null && command -v unshare >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    iproute2 util-linux >/dev/null; }

# colcon build/test of ros2_ws and the nodes against real rclpy, all DDS traffic inside the namespace, two
# workers on two DDS domains (tests/ros2/runtime/conftest.py); the robot actor's learner runs in .venv (ROBO_RL_PYTHON)
ros-test: $(ROS_STAMP) ros-system-deps
	OMP_NUM_THREADS=1 ROBO_RL_PYTHON=$(abspath $(PY)) ros2_ws/scripts/netns_run.sh $(ROS_PY) -m pytest -q -p no:cacheprovider \
	  -n 2 --confcutdir=tests/ros2/runtime tests/ros2/runtime

# Only this checkout's own environments: VENV=.. (or VENV taken from the shell's environment) removed that folder.
clean:
	@for venv in "$(VENV)" "$(ROS_VENV)"; do [ -e "$$venv" ] || continue; \
	  case "$$(realpath -m -- "$$venv")/" in "$(CURDIR)"/?*/) ;; *) echo "$$venv lies outside this checkout: make clean \
	  removes only the checkout's own environments (delete that one yourself)" >&2; exit 2;; esac; \
	  [ -f "$$venv/pyvenv.cfg" ] || { echo "$$venv is no virtual environment (no pyvenv.cfg): make clean leaves it" >&2; \
	  exit 2; }; done
	rm -rf -- "$(VENV)" "$(ROS_VENV)" bench/results .pytest_cache
