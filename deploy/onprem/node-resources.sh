#!/usr/bin/env bash
# Prints the `ray start` flags that describe this host's GPUs to a raytune-attn sweep:
#   --resources={"accelerator_type:<Ray's name>":1} --labels=raytune-attn/vendor=<v>,raytune-attn/arch=<a>
# Used by deploy/onprem.yaml's start commands (the local provider has one node type for all hosts, so each host
# describes itself). Ray's names: H100, A100, L40S, ... for NVIDIA; AMD-Instinct-MI300X-OAM, ... for AMD
# (ray.util.accelerators). A host with no GPU prints only its vendor label (cpu).
# Override: a file ~/.raytune-attn/ray-start-flags (or $RAYTUNE_ATTN_RAY_START_FLAGS) is printed as it is.
set -euo pipefail

override="${RAYTUNE_ATTN_RAY_START_FLAGS:-$HOME/.raytune-attn/ray-start-flags}"
if [[ -f "$override" ]]; then
  tr '\n' ' ' < "$override"
  echo
  exit 0
fi

vendor=cpu accel="" arch=""
if command -v nvidia-smi >/dev/null 2>&1 && name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)" && [[ -n "$name" ]]; then
  vendor=nvidia
  # Ray 2.60's name (ray/_private/accelerators/nvidia_gpu.py): the second word on, upper-case words then a model
  # token with a digit, spaces as '-' ("NVIDIA H100 80GB HBM3" -> H100, "NVIDIA RTX A6000" -> RTX-A6000,
  # "Tesla V100-SXM2-16GB" -> V100); else the name without "NVIDIA " ("NVIDIA GeForce RTX 4090" -> GeForce-RTX-4090).
  accel="$(sed -nE 's/^[A-Za-z0-9_]+[[:space:]]+(([A-Z]+[[:space:]]+)*[A-Z0-9]*[0-9][A-Z0-9]*).*/\1/p' <<<"$name" | sed 's/ /-/g')"
  if [[ ${#accel} -le 1 ]]; then
    accel="$(sed -E 's/^NVIDIA[[:space:]]+//; s/[[:space:]]+$//; s/ /-/g' <<<"$name")"
  fi
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')"
  [[ -n "$cc" ]] && arch="sm$cc"
elif command -v amd-smi >/dev/null 2>&1 || command -v rocm-smi >/dev/null 2>&1; then
  info="$( (amd-smi static --asic 2>/dev/null || true; rocm-smi --showproductname 2>/dev/null || true) )"
  model="$(grep -oE 'MI[0-9]{3}[A-Z]?' <<<"$info" | head -n1 || true)"
  if [[ -n "$model" ]]; then
    vendor=amd
    # Ray's names for these models (ray/_private/accelerators/amd_gpu.py, by PCI id): the OAM modules carry -OAM,
    # the MI250 (not X) is named after the MI250X; the sweep and Ray's own detection then agree on the node's type.
    case "$model" in
      MI300X|MI308X|MI325X) accel="AMD-Instinct-$model-OAM" ;;
      MI250) accel=AMD-Instinct-MI250X-MI250 ;;
      *) accel="AMD-Instinct-$model" ;;
    esac
    arch="$(grep -oE 'gfx[0-9a-f]+' <<<"$info" | head -n1 || true)"
  fi
fi

flags=""
[[ -n "$accel" ]] && flags="--resources={\"accelerator_type:$accel\":1} "
labels="raytune-attn/vendor=$vendor"
[[ -n "$arch" ]] && labels="$labels,raytune-attn/arch=$arch"
echo "${flags}--labels=$labels"
