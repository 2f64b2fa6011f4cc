#!/usr/bin/env bash
# The offline bundle's smoke check (CI, after `npm run bundle`): unpack the archive into an empty
# folder and, with a PATH that holds no `node` and in a network namespace without network
# (`unshare -rn`, as the sandbox uses), run `arbor doctor --json`, a two-step `arbor train` of the
# tiny model, `arbor bench decode --shape tiny` and a step of the two-tool task (user TypeScript
# tools in the sandbox); each must exit 0.
set -euo pipefail
archive=$(realpath "${1:?usage: scripts/bundle-check.sh dist/arbor-<version>-linux-x64.tar.xz}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/unpacked" "$work/tools" "$work/home"
if [ -d "$archive" ]; then cp -a "$archive" "$work/unpacked/" # an unpacked bundle folder (ARBOR_BUNDLE_STAGE_ONLY=1)
else tar -C "$work/unpacked" -xJf "$archive"; fi
dir=$(find "$work/unpacked" -mindepth 1 -maxdepth 1 -type d)
unshare=$(command -v unshare)
# Only the tools the launcher needs: no node anywhere on PATH.
for t in sh dirname readlink; do ln -s "$(command -v "$t")" "$work/tools/$t"; done
cat > "$work/train.yaml" <<'YAML'
name: bundle-smoke
model: { init: tiny }
steps: 2
rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 8 }
eval: { every: 0, n_questions: 2 }
checkpoint: { every: 2, keep: 1 }
YAML
run() { # the command line, run offline with the bundle's launcher
  echo "+ arbor $*" >&2
  (cd "$work" && env -i HOME="$work/home" ARBOR_HOME="$work/home/.arbor" PATH="$work/tools" "$unshare" -rn "$dir/arbor" "$@")
}
if env -i PATH="$work/tools" sh -c 'command -v node' >/dev/null; then
  echo "bundle-check: node is on the check's PATH" >&2
  exit 1
fi
run doctor --json >"$work/doctor.json"
grep -q '"supported": true' "$work/doctor.json"
run train "$work/train.yaml" --json | tail -n 1
run bench decode --shape tiny | tail -n 4
# The sandbox from the archive: the two-tool task's TypeScript tool and reward files (esbuild, the
# QuickJS child entry and its wasm), one SFT step and one RL step.
run train "$dir/resources/configs/tools.yaml" --yes --steps 1 --set sft.epochs=1 --set sft.demos=16 --set sft.eval_every=1 \
  --set eval.n_questions=2 --set eval.validation=4 --set rollout.prompts_per_step=2 --set rollout.n=2 --json | tail -n 1 | cut -c1-200
echo "bundle-check: $(basename "$archive") ok (doctor, train, bench decode, the sandbox's tools; no node on PATH, no network)"
