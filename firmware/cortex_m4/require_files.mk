# Included by firmware/cortex_m4 and firmware/arm. A folder given on the command line (POLICY_DIR, VECTORS_DIR,
# CONFIG_DIR) that lacks what the build reads stops make before anything is compiled, in one line naming the
# variable: otherwise make says "No rule to make target '.../policy.o'", or the compiler "No such file" after
# some objects and .su files were already written to BUILD.
#
# $(call require_files,VARIABLE,FILES,HINT): stop unless the folder $(VARIABLE) holds every one of FILES.
# HINT says what to give instead; pass it as a variable reference ($(POLICY_HINT)), as a comma in the text
# itself would split the call's arguments.
missing_files = $(filter-out $(notdir $(wildcard $(addprefix $($(1))/,$(2)))),$(2))
require_files = $(if $(call missing_files,$(1),$(2)),$(error $(1)=$($(1)) has no $(call missing_files,$(1),$(2)) \
  (looked in $(abspath $($(1)))); $(3)))

POLICY_HINT := give the c/ folder of an export, e.g. <run>/export/c from python -m robo_rl.export (a policy on \
  camera images has none: it runs as ONNX)
