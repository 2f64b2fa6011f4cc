# The Arbor environment's outcome reward for verl (custom_reward_function.path=reward.py,
# custom_reward_function.name=compute_score). Each call sends the decoded response to one
# long-lived `arbor verl-reward arbor-experiment.json` process (JSON lines over its stdin/stdout),
# which scores it with the same episode environment Arbor trains with (the task of
# extra_info["task_id"], with its meta; each tool call's success from extra_info["tool_rewards"],
# which verl's agent loop fills from the exported ArborMcpTool). Set ARBOR_CMD (e.g. "arbor")
# when arbor lives elsewhere than at export time. Copied into the export folder by
# `arbor export verl`, which prepends ARBOR_CMD_DEFAULT (a Python list literal).
import atexit
import json
import os
import shlex
import subprocess
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_CONFIG = os.path.join(_HERE, "arbor-experiment.json")
_lock = threading.Lock()
_proc = None


def _arbor():
    global _proc
    if _proc is None or _proc.poll() is not None:
        cmd = shlex.split(os.environ["ARBOR_CMD"]) if os.environ.get("ARBOR_CMD") else list(ARBOR_CMD_DEFAULT)  # noqa: F821
        _proc = subprocess.Popen(cmd + ["verl-reward", _CONFIG], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        atexit.register(_proc.kill)
    return _proc


def _plain(x):
    """numpy arrays / scalars (what verl's dataframes hold) to JSON-able Python values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def _targets(ground_truth):
    gt = _plain(ground_truth)
    if isinstance(gt, dict):
        gt = gt.get("target", gt.get("answers", []))
    if isinstance(gt, str):
        return [gt]
    return [str(g) for g in (gt or [])]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's custom reward signature; returns {"score": reward, <component>: value, ...}."""
    info = _plain(extra_info or {})
    request = {"data_source": data_source, "solution_str": solution_str, "ground_truth": _targets(ground_truth),
               "extra_info": info if isinstance(info, dict) else {}}
    with _lock:
        proc = _arbor()
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
    if not line:
        raise RuntimeError("arbor verl-reward exited (see its stderr above); is ARBOR_CMD right?")
    reply = json.loads(line)
    if "error" in reply:
        raise RuntimeError("arbor verl-reward: " + reply["error"])
    out = {"score": float(reply["reward"])}
    for k, v in reply.get("components", {}).items():
        out[k] = float(v)
    return out
