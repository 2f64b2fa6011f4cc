// An LLM judge (environment.judge) is a consent item under the one rule (issue 42's leftover): a
// shared config that names a judge URL would send every training trajectory there, so the run
// asks first, with the URL and the key variable's NAME (never its value); `--yes` approves it like
// the rest, the workbench's dialog carries it, and another URL or key variable asks again.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateLoaded } from '../../../engine/config/experiment';
import { cliAsker, ConsentRefused, describeItems, judgeItem, setConsentAsker, type ConsentRequest } from '../../../engine/env/consent';
import { events } from '../../../engine/server/protocol';
import { askConfigConsent } from '../../../engine/tasks/open';

let dir: string;
const saved = { home: process.env.ARBOR_HOME, key: process.env.ARBOR_TEST_JUDGE_KEY };
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-consent-judge-'));
  process.env.ARBOR_HOME = join(dir, 'home');
  process.env.ARBOR_TEST_JUDGE_KEY = 'sk-the-secret-value';
});
afterAll(() => {
  setConsentAsker(null);
  if (saved.home === undefined) delete process.env.ARBOR_HOME;
  else process.env.ARBOR_HOME = saved.home;
  if (saved.key === undefined) delete process.env.ARBOR_TEST_JUDGE_KEY;
  else process.env.ARBOR_TEST_JUDGE_KEY = saved.key;
  rmSync(dir, { recursive: true, force: true });
});

const config = (judge: Record<string, unknown>) =>
  validateLoaded({ name: 'judged', model: { init: 'tiny' }, environment: { judge: { model: 'm', rubric: 'r', ...judge } } }, { baseDir: dir });

describe('environment.judge asks first', () => {
  it('a config with a judge URL asks before the run starts: the URL and the key variable’s name, never its value; no means nothing runs', async () => {
    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), false));
    const cfg = config({ base_url: 'https://judge.example.org/v1', api_key_env: 'ARBOR_TEST_JUDGE_KEY', references: true });
    await expect(askConfigConsent(cfg)).rejects.toBeInstanceOf(ConsentRefused);
    expect(asked).toHaveLength(1);
    const [item] = asked[0]!.items;
    expect(item!.kind).toBe('judge');
    expect(item!.label).toBe(
      "https://judge.example.org/v1: every training trajectory and the task's gold answers is sent there, with the key from $ARBOR_TEST_JUDGE_KEY",
    );
    const shown = describeItems(asked[0]!.items);
    expect(shown).toMatch(/LLM judge \(trajectories leave this machine\)/);
    expect(`${shown}${JSON.stringify(asked)}`).not.toContain('sk-the-secret-value');
    // The workbench's consent event carries the kind.
    expect(events.consent.parse({ id: 'c1', origin: asked[0]!.origin, items: asked[0]!.items }).items[0]!.kind).toBe('judge');
  });

  it('--yes approves it (remembered); the same URL and key name ask nothing again, another URL, key variable or references do', async () => {
    const cfg = config({ base_url: 'http://127.0.0.1:8000/v1', api_key_env: 'ARBOR_TEST_JUDGE_KEY' });
    const stderr = process.stderr.write.bind(process.stderr);
    let printed = '';
    process.stderr.write = ((s: string) => ((printed += s), true)) as typeof process.stderr.write;
    try {
      setConsentAsker(cliAsker({ yes: true }));
      await askConfigConsent(cfg);
    } finally {
      process.stderr.write = stderr;
    }
    expect(printed).toMatch(
      /approved with --yes:\n {2}- LLM judge \(trajectories leave this machine\): http:\/\/127\.0\.0\.1:8000\/v1: every training trajectory is sent there, with the key from \$ARBOR_TEST_JUDGE_KEY/,
    );
    const asked: ConsentRequest[] = [];
    setConsentAsker(async (req) => (asked.push(req), false));
    // Another model or rubric at the same endpoint sends the same data to the same place.
    await askConfigConsent(config({ base_url: 'http://127.0.0.1:8000/v1', api_key_env: 'ARBOR_TEST_JUDGE_KEY', model: 'other', rubric: 'other' }));
    expect(asked).toHaveLength(0);
    for (const other of [
      { base_url: 'http://127.0.0.1:8001/v1', api_key_env: 'ARBOR_TEST_JUDGE_KEY' },
      { base_url: 'http://127.0.0.1:8000/v1', api_key_env: 'OPENAI_API_KEY' },
      { base_url: 'http://127.0.0.1:8000/v1' },
      { base_url: 'http://127.0.0.1:8000/v1', api_key_env: 'ARBOR_TEST_JUDGE_KEY', references: true },
    ])
      await expect(askConfigConsent(config(other))).rejects.toBeInstanceOf(ConsentRefused);
    expect(asked.map((r) => r.items.map((i) => i.kind))).toEqual([['judge'], ['judge'], ['judge'], ['judge']]);
    expect(asked[2]!.items[0]!.label).toMatch(/with no key$/);
    expect(new Set([judgeItem({ base_url: 'http://a/v1' }).hash, judgeItem({ base_url: 'http://b/v1' }).hash]).size).toBe(2);
  });
});
