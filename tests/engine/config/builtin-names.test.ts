// "One thing, one place" (#43): every built-in registry entry (advantage estimator, policy loss,
// tool-call format, task kind) is one module that registers itself with everything about it, so no
// other engine file switches on its name. This test reads every engine file with TypeScript's parser
// and finds each registered built-in name as a string literal: outside its entry's home (the entry
// modules of its registry) it must not occur, except for the uses listed below, each with its reason
// (another thing of the same spelling, or a config that chooses the entry by name, as a user's does).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { FORMAT_NAMES } from '../../../engine/env/formats';
import { estimatorNames } from '../../../engine/rl';
import { policyLossNames } from '../../../engine/rl/policy-losses';
import { taskKinds } from '../../../engine/tasks/registry';

const ENGINE = join(__dirname, '..', '..', '..', 'engine');

/** Each registry's built-in names and where their entries live (engine-relative path prefixes). */
const REGISTRIES = [
  { what: 'advantage estimator', names: estimatorNames(), home: () => ['rl/advantage/'] },
  { what: 'policy loss', names: policyLossNames(), home: () => ['rl/loss/'] },
  { what: 'tool-call format', names: [...FORMAT_NAMES], home: () => ['env/format-'] },
  { what: 'task kind', names: taskKinds(), home: (name: string) => [`tasks/${name}/`] },
];

/** Uses outside an entry's home that are not a switch on the entry: file (engine-relative) → names → why. */
const ALLOWED: Record<string, Record<string, string>> = {
  'rollout/branching.ts': { aepo: "rollout.branching.mode's own choice (AEPO's branching rollouts), not the policy loss" },
  'rollout/branch-groups.ts': { aepo: 'rollout.branching.mode "aepo" (the branching rollouts), not the policy loss' },
  'config/experiment.ts': { aepo: 'the INERT rules of rollout.branching.mode "aepo" (the branching rollouts), not the policy loss' },
  'tasks/multihop/kit.ts': { 'search-r1': 'the multi-hop world is written in Search-R1 tags (its task data, as a config would name it)' },
  'tasks/multihop/rollout.ts': { tools: "the rollout mode 'tools' (vs 'naive-rag'), not the task kind" },
  'tasks/multihop/task.ts': { tools: "the rollout mode 'tools' (vs 'naive-rag'), not the task kind" },
  'tasks/sources.ts': { tools: "the rollout mode 'tools' (vs 'naive-rag'), not the task kind" },
  'tasks/tools/kit.ts': { hermes: 'the two-tool task is written in Hermes JSON calls (its task data)' },
  'model/tokenizer.ts': { tools: 'a chat role of the tiny tokenizer' },
  'openai/chat.ts': { tools: "the OpenAI request's tools field" },
  'server/workspace-files.ts': { tools: "the workspace's tools/ folder" },
  'interop/environment.ts': {
    tools: "a workspace environment's tools/ folder",
    hermes: "verl's own name of its one tool-call parser (multi_turn.format), VERL_TOOL_PARSER",
  },
  'cli/commands/runs.ts': { tags: 'the runs table column' },
  'cli/commands/demo.ts': { tools: 'a progress-bar field' },
  'cli/commands/train.ts': { tools: 'a progress-bar field' },
  'cli/commands/rollout.ts': {
    tools: "the rollout mode 'tools' (vs 'naive-rag')",
    multihop: "--task's default, chosen by name as a config chooses it",
  },
  'cli/commands/init-model.ts': { multihop: "--task's default, chosen by name as a config chooses it" },
  'cli/commands/plan.ts': { grpo: 'a measured configuration, chosen by name as a config chooses it', multihop: 'a measured configuration' },
  'recipes/ablation.ts': {
    grpo: 'the named ablation arms: configs choosing entries by name',
    gspo: 'the named ablation arms',
    gigpo: 'the named ablation arms',
    aepo: 'the named ablation arms',
    ppo: 'the named ablation arms',
  },
  'recipes/demo.ts': { grpo: "the demo's phases and their configs, chosen by name", ppo: "the demo's phases", gae: "the demo's PPO phase config" },
  'server/templates.ts': {
    'search-r1': "the launch form's default format",
    tools: "the workspace's tools/ folder",
    multihop: 'the run templates: example configs choosing a task kind by name',
    qa: 'the run templates: example configs',
  },
};

function engineFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? engineFiles(join(dir, e.name)) : /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [join(dir, e.name)] : [],
  );
}

/** Every string literal's value in a file (quotes, and templates without substitutions), with its line. */
function stringLiterals(file: string): { value: string; line: number }[] {
  const src = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: { value: string; line: number }[] = [];
  const visit = (n: ts.Node) => {
    if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n))
      out.push({ value: n.text, line: src.getLineAndCharacterOfPosition(n.getStart()).line + 1 });
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

describe('built-in entry names', () => {
  const files = engineFiles(ENGINE).map((f) => ({ rel: relative(ENGINE, f).split(sep).join('/'), literals: stringLiterals(f) }));

  it('the registries hold the built-ins (the test reads real names)', () => {
    expect(REGISTRIES.map((r) => r.names.length)).toEqual([7, 3, 3, 4]);
    expect(REGISTRIES.flatMap((r) => r.names)).toContain('gspo');
  });

  it('no engine file outside an entry’s home names it in a string literal (except the listed other meanings)', () => {
    const found: string[] = [];
    for (const r of REGISTRIES)
      for (const name of r.names)
        for (const f of files) {
          if (r.home(name).some((h) => f.rel.startsWith(h))) continue;
          if (ALLOWED[f.rel]?.[name]) continue;
          for (const l of f.literals) if (l.value === name) found.push(`engine/${f.rel}:${l.line} names the ${r.what} "${name}"`);
        }
    expect(found).toEqual([]);
  });

  it('every listed exception is still there (the list stays true)', () => {
    const stale: string[] = [];
    for (const [rel, names] of Object.entries(ALLOWED))
      for (const name of Object.keys(names)) if (!files.find((f) => f.rel === rel)?.literals.some((l) => l.value === name)) stale.push(`${rel}: ${name}`);
    expect(stale).toEqual([]);
  });
});

describe('a process that has not loaded the built-ins', () => {
  it('refuses a config naming the field and saying what to import (config/ cannot import tasks/)', () => {
    const script = `import { validateConfig } from ${JSON.stringify(join(ENGINE, 'config', 'experiment.ts'))};
try { validateConfig({ model: { init: 'tiny' } }); console.log('accepted'); } catch (e) { console.log(e.message); }`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 110_000 });
    expect(r.stdout).toMatch(/task\.kind: no task kind is registered in this process \(the built-in ones register when engine\/builtins\.ts is imported\)/);
  });
});
