#!/usr/bin/env bash
# Installs the Debian packages the project needs, if any is missing (idempotent):
# Icarus Verilog, Debian's Verilator 5.006 (for pyverilator), z3 (for yowasp-sby) and OpenSTA (static timing and
# power of the standard-cell flow).
set -euo pipefail
missing=()
command -v iverilog >/dev/null || missing+=(iverilog)
[ -x /usr/bin/verilator ] || missing+=(verilator)
command -v z3 >/dev/null || missing+=(z3)
command -v sta >/dev/null || missing+=(opensta)
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
