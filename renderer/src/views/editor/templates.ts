// What "New tool", "New reward" and "New MCP servers" put in the new file.
export const TOOL_TEMPLATE = `import type { Tool } from 'arbor/env';

export const tool: Tool = {
  name: 'my_tool',
  description: 'Describe what the tool does for the model.',
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  async execute(args, ctx) {
    // ctx.signal aborts on timeout; ctx.episode is state shared by the tools of one episode.
    return { content: String(args.query), success: true };
  },
};
`;

export const REWARD_TEMPLATE = `import type { RewardFn } from 'arbor/env';

// A reward sees the episode summary: answer, golds, model turn texts, tool call/error counts, retrieved passages.
export const reward: RewardFn = (e) => {
  return e.answer !== undefined && e.golds.includes(e.answer) ? 1 : 0;
};
`;

// node: the engine's own Node; cwd defaults to the workspace folder, relative paths resolve against it.
export const MCP_TEMPLATE = `{
  "mcpServers": {
    "my_server": {
      "command": "node",
      "args": ["path/to/server.js"],
      "env": {},
      "timeout_ms": 30000
    }
  }
}
`;
