# Included by firmware/cortex_m4 and firmware/arm. make rebuilds by file times alone, so a build into an existing
# BUILD kept objects compiled from what it was given before: a regenerated arm_config.h (no object lists it as a
# prerequisite; the arm app kept its old joint-speed limit and host timeout), another bundle whose files are older
# than the objects, other EXTRA_CFLAGS. $(BUILD)/inputs.stamp records the flags, the folders and a digest of their C
# sources and headers; it is rewritten when any of them differs from the last build's, and every object lists it.
#
# $(call stamp_inputs,FOLDERS,FLAGS): bring $(BUILD)/inputs.stamp up to date (nothing for `make clean`).
INPUTS_STAMP = $(BUILD)/inputs.stamp
stamp_inputs = $(if $(filter-out clean,$(or $(MAKECMDGOALS),all)),$(call _write_stamp,$(strip $(abspath $(1)) $(2) \
  $(shell cat $(sort $(wildcard $(addsuffix /*.c,$(1)) $(addsuffix /*.h,$(1)))) /dev/null | md5sum))))
_differs = $(subst $(1),,$(2))$(subst $(2),,$(1))
_write_stamp = $(if $(call _differs,$(1),$(file <$(INPUTS_STAMP))),$(shell mkdir -p $(BUILD))$(file >$(INPUTS_STAMP),$(1)))
# make caches a folder's listing when it first reads it (require_files does), so it may not see a stamp written
# after that: a rule without a recipe lets make take a stamp it missed as just made (its objects rebuild, as they
# must after a write). Not the default goal: the including Makefile's first target stays that.
$(INPUTS_STAMP): ;
.DEFAULT_GOAL :=
