# A verl tool (tool_config.yaml: class_name arbor_tool.ArborMcpTool) that calls one tool of an
# Arbor environment served by `arbor mcp serve --http` (URL in ARBOR_MCP_URL, bearer token in
# ARBOR_MCP_TOKEN; run_verl.sh sets both). The sample's tools_kwargs.<tool>.create_kwargs are sent
# as MCP _meta["arbor/episode"], so a tool can serve the sample's own task. Errors (isError results,
# timeouts, an unreachable server) come back as the observation text, as in Arbor, and each call's
# success as its tool reward (+1 / -1), which reward.py hands to `arbor verl-reward`.
import asyncio
import json
import os
import urllib.error
import urllib.request
from uuid import uuid4

try:
    from verl.tools.base_tool import BaseTool
except ImportError:  # outside verl (tests): a plain base
    BaseTool = object
try:
    from verl.tools.schemas import ToolResponse
except ImportError:
    ToolResponse = None


def _schema_dict(schema):
    if hasattr(schema, "model_dump"):
        return schema.model_dump(exclude_unset=True, exclude_none=True)
    return schema


def call_arbor_tool(name, arguments, episode, timeout=60.0, url=None, token=None):
    """One MCP tools/call over streamable HTTP (stateless server: one POST). Returns (text, is_error)."""
    url = url or os.environ.get("ARBOR_MCP_URL", "http://127.0.0.1:8765/mcp")
    token = token or os.environ.get("ARBOR_MCP_TOKEN", "")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"arbor/episode": episode}}}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        "authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            reply = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return "Error: arbor mcp serve answered HTTP %d: %s" % (e.code, e.read().decode(errors="replace")[:300]), True
    except Exception as e:  # timeout, connection refused
        return "Error: cannot reach arbor mcp serve at %s: %s" % (url, e), True
    if "error" in reply:
        return "Error: " + str(reply["error"].get("message")), True
    result = reply.get("result", {})
    text = "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
    return text, bool(result.get("isError"))


class ArborMcpTool(BaseTool):
    def __init__(self, config, tool_schema):
        if BaseTool is not object:
            super().__init__(config, tool_schema)
        else:
            self.config, self.tool_schema = config, tool_schema
            self.name = _schema_dict(tool_schema)["function"]["name"]
        self.timeout = float((config or {}).get("timeout", 60))
        self._episodes = {}

    def get_openai_tool_schema(self):
        return self.tool_schema

    async def create(self, instance_id=None, **kwargs):
        instance_id = instance_id or str(uuid4())
        episode = kwargs.get("create_kwargs", kwargs) or {}
        self._episodes[instance_id] = dict(episode)
        # newer verl unpacks (instance_id, ToolResponse); older verl takes the id alone
        return (instance_id, ToolResponse()) if ToolResponse is not None else instance_id

    async def execute(self, instance_id, parameters, **kwargs):
        episode = self._episodes.get(instance_id, {})
        text, is_error = await asyncio.to_thread(call_arbor_tool, self.name, parameters, episode, self.timeout)
        metrics = {"is_error": is_error}
        # The tool reward carries the call's success to the reward (verl passes the list to the
        # reward function as extra_info["tool_rewards"]; it adds nothing to the score itself):
        # +1 the call succeeded, -1 it failed, as Arbor's reward sees it (ToolCallTrace.success).
        return (ToolResponse(text=text) if ToolResponse is not None else text), (-1.0 if is_error else 1.0), metrics

    async def calc_reward(self, instance_id, **kwargs):
        return 0.0

    async def release(self, instance_id, **kwargs):
        self._episodes.pop(instance_id, None)
