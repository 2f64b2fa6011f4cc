"""An agent program in Python with only the standard library (urllib): the same two tools and loop
as agent.ts. Train it by setting environment.agent.command: [python3, agent.py] in train.yaml.
- One process per episode (environment.agent.mode: process): Arbor starts it with OPENAI_BASE_URL,
  OPENAI_API_KEY and ARBOR_TASK in its environment; the last line it prints is its answer.
- Long-lived (environment.agent.mode: serve, ARBOR_AGENT_MODE=serve): started once, it is handed
  episodes by `serve` below (a JSON line on stdin each: {id, task, base_url, api_key}), runs each on
  a thread and answers with a JSON line {id, answer} on stdout."""
import json
import math
import os
import re
import sys
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "tools-task", "world.json"), encoding="utf-8") as f:
    FACTS = json.load(f)["facts"]


def api(base, key, path, body=None):
    req = urllib.request.Request(
        base.rstrip("/") + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def as_text(v):
    """An argument as agent.ts's String(…) writes it (so both agents send the model the same results)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


def lookup(entity):
    key = re.sub(r"^the ", "", entity.strip().lower())
    return FACTS.get(key, "no entry for " + key)


def number(v):
    """A number as JavaScript's String(…) writes it (agent.ts)."""
    if v == int(v):
        return str(int(v))
    return ("%.6f" % v).rstrip("0").rstrip(".")


def calculator(expression):
    # + - * / and parentheses, parsed (never evaluated as code); the same results as agent.ts's.
    toks = re.findall(r"\d+(?:\.\d+)?|[-+*/()]|\S", expression, re.ASCII)
    pos = [0]

    def take():
        pos[0] += 1
        return toks[pos[0] - 1] if pos[0] - 1 < len(toks) else None

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def primary():
        t = take()
        if t == "-":
            return -primary()
        if t == "(":
            v = total()
            if take() != ")":
                raise ValueError("missing )")
            return v
        if t is not None and t[0] in "0123456789":
            return float(t)
        raise ValueError("unexpected " + ("end" if t is None else t))

    def divide(a, b):
        if b:
            return a / b
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a)

    def product():
        v = primary()
        while peek() in ("*", "/"):
            v = v * primary() if take() == "*" else divide(v, primary())
        return v

    def total():
        v = product()
        while peek() in ("+", "-"):
            v = v + product() if take() == "+" else v - product()
        return v

    try:
        v = total()
        if pos[0] < len(toks) or not math.isfinite(v):
            raise ValueError("not an arithmetic expression")
        return number(math.floor(v * 1e6 + 0.5) / 1e6)
    except (ValueError, OverflowError) as e:
        return "error: " + str(e)


TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "the fact about an organisation or a person",
     "parameters": {"type": "object", "properties": {"entity": {"type": "string"}}, "required": ["entity"]}}},
    {"type": "function", "function": {"name": "calculator", "description": "evaluate arithmetic",
     "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}},
]

MODEL = [os.environ.get("OPENAI_MODEL")]


def solve(task, base, key):
    if not MODEL[0]:
        MODEL[0] = api(base, key, "/models")["data"][0]["id"]
    messages = [{"role": "user", "content": task.get("prompt") or task.get("question") or ""}]
    for _ in range(6):
        r = api(base, key, "/chat/completions", {"model": MODEL[0], "messages": messages, "tools": TOOLS, "max_tokens": 48})
        msg = r["choices"][0]["message"]
        # Sent back verbatim: the server continues from the ids it sampled.
        turn = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            turn["tool_calls"] = msg["tool_calls"]
        messages.append(turn)
        if not msg.get("tool_calls"):
            text = msg.get("content") or ""
            m = re.search(r"<answer>([\s\S]*?)(</answer>|$)", text)
            return (m.group(1) if m else text).strip()
        for call in msg["tool_calls"]:
            try:
                args = json.loads(call["function"]["arguments"])
            except ValueError:
                args = {}
            if not isinstance(args, dict):
                args = {}
            name = call["function"]["name"]
            result = lookup(as_text(args.get("entity"))) if name == "lookup" else calculator(as_text(args.get("expression"))) if name == "calculator" else "error: unknown tool " + name
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return ""


# The whole long-lived mode: episodes in as JSON lines, each on a thread, answers out as JSON lines.
def serve(handle, out=threading.Lock()):
    def run(ep):
        try: reply = {"id": ep["id"], "answer": handle(ep)}
        except Exception as e: reply = {"id": ep["id"], "error": repr(e)}
        with out: print(json.dumps(reply), flush=True)
    for line in sys.stdin: threading.Thread(target=run, args=(json.loads(line),), daemon=True).start()


if os.environ.get("ARBOR_AGENT_MODE") == "serve":
    serve(lambda ep: solve(ep["task"], ep["base_url"], ep["api_key"]))
else:
    print(solve(json.loads(os.environ.get("ARBOR_TASK", "{}")), os.environ["OPENAI_BASE_URL"], os.environ.get("OPENAI_API_KEY", "")))
