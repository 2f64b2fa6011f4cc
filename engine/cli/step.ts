/**
 * `arbor rollout --step --checkpoint <id>`: the live rollout you can pause (engine/playground/live.ts)
 * in a terminal, through the engine protocol (live.start / live.step). One line per action:
 *   in a model turn   Enter: next token · <k>: force alternative k · f <text>: force that token ·
 *                     t: finish the turn · r: run to the end · q: quit
 *   after a tool call Enter: give the result to the model · e <text>: give this instead · r · q
 * The finished episode is stored in the checkpoint's run (step −1) and its id printed.
 */
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { withEngine } from './engine-client';
import type { LiveState } from '../server/protocol';

export interface StepOptions {
  checkpoint?: string;
  temperature?: number;
  seed?: number;
  engine?: string;
}

function show(st: LiveState, out: Writable): void {
  const w = (s: string) => out.write(`${s}\n`);
  if (st.phase === 'model') {
    const u = st.turns[st.turns.length - 1]!;
    w(`model turn ${st.turns.filter((t) => t.role === 'model').length}: ${JSON.stringify(u.text)}${u.forced.length ? ` (${u.forced.length} forced)` : ''}`);
    w(`next: ${(st.next ?? []).map((c, i) => `${i + 1} ${JSON.stringify(c.token)} ${c.prob.toFixed(3)}`).join(' · ')}`);
    out.write('[Enter] token · <k> force k · f <text> force · t turn · r to the end · q quit > ');
  } else if (st.phase === 'tool') {
    for (const c of st.pending?.calls ?? []) w(`tool ${c.name}(${JSON.stringify(c.args)})${c.error ? ` error: ${c.error}` : ''}`);
    w(`result (the model has not seen it): ${JSON.stringify(st.pending?.text ?? '')}`);
    out.write('[Enter] give it · e <text> give this instead · r to the end · q quit > ');
  } else if (st.result) {
    w(
      `done: reward ${st.result.reward.toFixed(4)}, answer ${st.result.answer === undefined ? '—' : JSON.stringify(st.result.answer)}, ${st.result.reason}; stored as trajectory ${st.result.trajectoryId}`,
    );
  }
}

export async function stepRollout(o: StepOptions, input: Readable = process.stdin, out: Writable = process.stdout): Promise<LiveState> {
  if (!o.checkpoint) throw new Error('--step: give --checkpoint <id> (a checkpoint of a run: `arbor show <run>` lists them); the run gives the task and tools');
  return withEngine({ engine: o.engine }, async (c) => {
    let st = await c.request('live.start', {
      checkpoint: o.checkpoint!,
      ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
      ...(o.seed !== undefined ? { seed: o.seed } : {}),
    });
    out.write(`task ${st.task}, checkpoint ${st.checkpoint.id}, temperature ${st.temperature}\nprompt: ${JSON.stringify(st.turns[0]!.text)}\n`);
    show(st, out);
    const rl = createInterface({ input, terminal: false });
    try {
      for await (const raw of rl) {
        const line = raw.trim();
        const sessionId = st.sessionId;
        try {
          if (line === 'q') {
            await c.request('live.close', { sessionId });
            out.write('quit: nothing stored\n');
            return st;
          }
          if (line === 'r') st = await c.request('live.step', { sessionId, action: 'finish' });
          else if (st.phase === 'model') {
            if (line === '') st = await c.request('live.step', { sessionId, action: 'token' });
            else if (line === 't') st = await c.request('live.step', { sessionId, action: 'turn' });
            else if (/^\d+$/.test(line)) {
              const alt = st.next?.[Number(line) - 1];
              if (!alt) throw new Error(`no alternative ${line} (1..${st.next?.length ?? 0})`);
              st = await c.request('live.step', { sessionId, action: 'force', tokenId: alt.id });
            } else if (line.startsWith('f ')) st = await c.request('live.step', { sessionId, action: 'force', text: line.slice(2) });
            else throw new Error(`"${line}": not an action here`);
          } else if (st.phase === 'tool') {
            if (line === '') st = await c.request('live.step', { sessionId, action: 'observation' });
            else if (line.startsWith('e ')) st = await c.request('live.step', { sessionId, action: 'observation', text: line.slice(2) });
            else throw new Error(`"${line}": not an action here`);
          }
        } catch (e) {
          out.write(`${(e as Error).message}\n`);
        }
        show(st, out);
        if (st.phase === 'done') return st;
      }
      // Input ended before the episode did: close it (nothing stored).
      if (st.phase !== 'done') await c.request('live.close', { sessionId: st.sessionId });
      return st;
    } finally {
      rl.close();
    }
  });
}
