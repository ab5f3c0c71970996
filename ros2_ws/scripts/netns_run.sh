#!/usr/bin/env bash
# Run a command in a private network namespace with only loopback, so DDS discovery (multicast on every
# interface) never leaves the machine: unshare -n, bring lo up, route multicast over lo.
# Usage: ros2_ws/scripts/netns_run.sh <command> [args...]   (as root, or where unprivileged user
# namespaces are allowed: then it maps the caller to root inside a new user namespace).
set -euo pipefail
if [ "${ROBO_RL_IN_NETNS:-}" != 1 ]; then
  if [ "$(id -u)" = 0 ]; then flags=(-n); else flags=(-r -n); fi
  ROBO_RL_IN_NETNS=1 exec unshare "${flags[@]}" -- "$0" "$@"
fi
ip link set lo up
ip link set lo multicast on
ip route add 224.0.0.0/4 dev lo 2>/dev/null || true
exec "$@"
