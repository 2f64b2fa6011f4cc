/**
 * `arbor replay <trajectory> --at-turn K [--at-token T] [--observation TEXT | --text TEXT]
 *   --model <checkpoint|folder> --n N [--temperature t] [--seed s] [--json]`:
 * a what-if replay through the engine protocol (replay.fork, engine/replay). Turns are numbered as
 * the workbench's replay shows them (turn 1 is the prompt). The continuations are stored in the
 * trajectory's run, linked to it; `arbor show <run>` lists them.
 */
import type { Command } from 'commander';
import { withEngine } from '../engine-client';
import { progressBar, type Progress } from '../progress';

const int = (flag: string, min: number) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag}: expected an integer ≥ ${min} (got "${v}")`);
  return n;
};

export function register(program: Command): void {
  program
    .command('replay <trajectory>')
    .description('fork a stored trajectory at a turn (optionally editing an observation or the model text) and re-sample the rest with a checkpoint')
    .requiredOption('--at-turn <K>', 'the turn to fork at, numbered as the replay shows them (1 = the prompt)', int('--at-turn', 1))
    .option('--at-token <T>', 'inside a model turn: keep its first T tokens', int('--at-token', 0))
    .option('--observation <text>', "a tool turn: the tool's result the model sees instead")
    .option('--text <text>', 'a model turn: text appended after the kept tokens (then the model continues)')
    .requiredOption('--model <checkpoint|folder>', 'a checkpoint id (arbor show <run> lists them) or a model folder')
    .requiredOption('--n <N>', 'continuations to sample', int('--n', 1))
    .option('--temperature <t>', 'sampling temperature (default 1; 0 = greedy)', (v) => {
      const t = Number(v);
      if (!(t >= 0) || !Number.isFinite(t)) throw new Error(`--temperature: expected a number ≥ 0 (got "${v}")`);
      return t;
    })
    .option('--seed <s>', 'sampling seed (default: random)', int('--seed', 0))
    .option('--json', 'print JSON')
    .option('--engine <url>', 'a running `arbor serve` (the URL it printed); default: this workspace ($ARBOR_HOME) in-process')
    .action(
      (
        trajectory: string,
        o: {
          atTurn: number;
          atToken?: number;
          observation?: string;
          text?: string;
          model: string;
          n: number;
          temperature?: number;
          seed?: number;
          json?: boolean;
          engine?: string;
        },
      ) =>
        withEngine(o, async (c) => {
          if (o.observation !== undefined && o.text !== undefined) throw new Error('give --observation (a tool turn) or --text (a model turn), not both');
          let bar: Progress | undefined;
          const off = c.on('replay', (e) => {
            if (e.trajectoryId !== trajectory || o.json || e.phase !== 'sampling') return;
            bar ??= progressBar('replay', e.total);
            bar.update(e.done);
          });
          const r = await c
            .request('replay.fork', {
              trajectoryId: trajectory,
              turn: o.atTurn - 1,
              ...(o.atToken !== undefined ? { token: o.atToken } : {}),
              ...(o.observation !== undefined ? { observation: o.observation } : {}),
              ...(o.text !== undefined ? { text: o.text } : {}),
              checkpoint: o.model,
              n: o.n,
              ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
              ...(o.seed !== undefined ? { seed: o.seed } : {}),
            })
            .finally(() => {
              off();
              bar?.stop();
            });
          if (o.json) return console.log(JSON.stringify(r, null, 2));
          const f = r.fork;
          console.log(
            `trajectory ${r.parent} forked at turn ${f.turn + 1}${f.token !== null ? `, token ${f.token}` : ''}: ${f.prefixTokens} stored tokens kept` +
              (f.edit
                ? `, then the ${f.edit.kind} edit as ${f.edit.ids.length} tokens [${f.edit.ids.join(' ')}]${f.edit.replaced === 'result' ? " (the tool's result replaced)" : ''}`
                : ''),
          );
          console.log(
            `checkpoint ${f.checkpoint.id}${f.checkpoint.step !== undefined ? ` (step ${f.checkpoint.step})` : ''}, temperature ${f.sampling.temperature}, seed ${f.sampling.seed}`,
          );
          const orig = r.prefix.original.filter((v): v is number => v !== null && Number.isFinite(v));
          const mean = (a: number[]) => (a.length ? a.reduce((x, y) => x + y, 0) / a.length : NaN);
          const scored = r.prefix.checkpoint.filter((v, i) => Number.isFinite(v) && r.prefix.original[i] !== null);
          console.log(
            `prefix: ${r.prefix.ids.length} tokens; mean logprob of the model's tokens: stored ${mean(orig).toFixed(4)}, under the checkpoint ${mean(scored).toFixed(4)}`,
          );
          for (const ch of r.children)
            console.log(
              `  ${ch.id}  reward ${ch.reward.toFixed(3)}  ${ch.truncated ? 'truncated  ' : ''}answer ${ch.answer === undefined ? '—' : JSON.stringify(ch.answer)}  (${ch.tokenIds.length - ch.forkAt} tokens sampled)`,
            );
        }),
    );
}
