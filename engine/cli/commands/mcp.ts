/**
 * `arbor mcp serve [--env <dir> | --config <experiment>] [--http [--port N] [--token T]]`:
 * an environment's tools over MCP (engine/interop/mcp-server.ts). Default environment: the
 * workspace's ($ARBOR_HOME/workspace) sandboxed TypeScript tools. With --config, the experiment's
 * environment (built-in task tools, sandboxed user tools, its MCP servers).
 * stdio by default (stdout is the protocol; messages go to stderr); --http serves streamable HTTP
 * on 127.0.0.1 and prints the URL and the bearer token (or uses --token / $ARBOR_MCP_TOKEN).
 */
import type { Command } from 'commander';
import { given } from '../flags';
import { join, resolve } from 'node:path';
import { arborHome } from '../../store/db';

interface ServeOptions {
  env?: string;
  config?: string;
  http?: boolean;
  port: string;
  token?: string;
  timeoutMs: string;
}

export function register(program: Command): void {
  const mcp = program.command('mcp').description("Model Context Protocol: serve an environment's tools to any MCP client (verl included)");
  mcp
    .command('serve')
    .description("serve an environment's tools over MCP (stdio, or streamable HTTP on 127.0.0.1 with a token)")
    .option('--env <dir>', 'workspace environment folder with tools/*.ts (default: $ARBOR_HOME/workspace)')
    .option('--config <file>', "serve the tools of an experiment config's environment instead")
    .option('--http', 'streamable HTTP on 127.0.0.1 instead of stdio')
    .option('--port <n>', 'HTTP port (0 = any free port)', '0')
    .option('--token <token>', 'HTTP bearer token (prefer $ARBOR_MCP_TOKEN: a flag is visible to other users in `ps`; default a random one, printed)')
    .option('--timeout-ms <ms>', "per-call time limit (default: the config's environment.tool_timeout_ms, else 30000)", '30000')
    .action(async (o: ServeOptions, cmd: Command) => {
      if (o.env && o.config) throw new Error('give --env or --config, not both');
      let timeoutMs = Number(o.timeoutMs);
      if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new Error(`--timeout-ms must be a positive integer (got "${o.timeoutMs}")`);
      const port = Number(o.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be 0–65535 (got "${o.port}")`);
      const { openConfigEnvironment, openWorkspaceEnvironment } = await import('../../interop/environment');
      let env;
      if (o.config) {
        const { loadEnvironmentConfig } = await import('./export-verl');
        const loaded = loadEnvironmentConfig(o.config, { warn: (l) => process.stderr.write(`${l}\n`) });
        if (!given(cmd, 'timeoutMs')) timeoutMs = loaded.cfg.environment.tool_timeout_ms;
        env = await openConfigEnvironment(loaded);
      } else env = await openWorkspaceEnvironment(resolve(o.env ?? join(arborHome(), 'workspace')));
      const limits = { timeoutMs, maxArgChars: 100_000, maxResultChars: 100_000 };
      const { serveMcpHttp, serveMcpStdio } = await import('../../interop/mcp-server');
      const log = (s: string) => process.stderr.write(`arbor mcp: ${s}\n`);
      log(`serving ${env.tools.map((t) => t.name).join(', ')} (${env.describe})`);
      const stop = async () => {
        await env.close();
        process.exit(0);
      };
      if (!o.http) {
        const { closed } = await serveMcpStdio(env.tools, { limits });
        await closed;
        return stop();
      }
      const h = await serveMcpHttp(env.tools, { limits, port, token: o.token ?? process.env.ARBOR_MCP_TOKEN });
      console.log(h.url);
      // A token handed in (flag or environment) is known to the caller: it is not echoed into logs.
      console.log(o.token || process.env.ARBOR_MCP_TOKEN ? `token (the one given${o.token ? ' with --token' : ' in $ARBOR_MCP_TOKEN'})` : `token ${h.token}`);
      process.on('SIGINT', () => void h.close().then(stop));
      process.on('SIGTERM', () => void h.close().then(stop));
    });
}
