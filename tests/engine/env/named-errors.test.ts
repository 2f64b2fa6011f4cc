// Errors name the file, the tool and the task: a tool whose parameters schema does not compile is
// refused when the environment opens (its file and name), and a custom task without meta.demo is
// named when a job needs the scripted expert.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import type { Tool } from '../../../engine/env/tool';
import { envSetup, taskTools } from '../../../engine/tasks/env-setup';
import { customKit } from '../../../engine/tasks/custom/kit';

describe('errors name file, tool and task', () => {
  it('a bad parameters schema names the tool file and the tool', () => {
    const bad: Tool = { name: 'lookup', description: 'd', parameters: { type: 'objekt' }, execute: () => ({ content: 'x', success: true }) };
    const setup = { ...envSetup(validateConfig({ model: { init: 'tiny' } })), userTools: [bad], toolFiles: new Map([['lookup', 'tools/lookup.ts']]) };
    expect(() => taskTools([], setup)).toThrow(/environment\.tools: tools\/lookup\.ts: tool "lookup": invalid parameters schema/);
  });

  it('custom tasks without meta.demo are named', () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-named-'));
    const dir = mkdtempSync(join(tmpdir(), 'arbor-named-tasks-'));
    const demo = [{ answer: 'a' }];
    const rows = Array.from({ length: 6 }, (_, i) => ({
      id: `t${i}`,
      prompt: `question ${i} ?`,
      answers: ['a'],
      ...(i === 2 ? {} : { meta: { demo } }),
    }));
    writeFileSync(join(dir, 'tasks.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'));
    const echo: Tool = { name: 'echo', description: 'echo', parameters: { type: 'object', properties: {} }, execute: () => ({ content: 'x', success: true }) };
    const cfg = validateConfig({ model: { init: 'tiny' }, task: { kind: 'custom' }, environment: { format: 'hermes', tasks: join(dir, 'tasks.jsonl') } });
    const kit = customKit(cfg, { mcpTools: [echo] });
    expect(kit.expert).toBeUndefined();
    expect(kit.noExpert).toMatch(/1 of 5 training tasks in .*tasks\.jsonl have no meta\.demo \(t2;/);
  });
});
