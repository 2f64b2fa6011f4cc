/**
 * The workbench's consent dialog, engine side: the asker `arbor serve` and the Electron engine
 * install (engine/env/consent.ts). A request is pushed to every connected window as a `consent`
 * event; the first `consent.answer` decides, and a `consent` event with `done` closes the dialog
 * everywhere. With no window connected (also when the last one goes while a question waits), or no
 * answer within 10 minutes, the answer is no; `runs.stop` answers no to the questions waiting, so
 * a run stuck at its question stops at once. Every text is shown with control characters escaped.
 */
import { randomUUID } from 'node:crypto';
import { ConsentRefused, describeItems, escapeControl, type ConsentAsker, type ConsentRequest } from '../env/consent';
import type { EngineServer } from './server';

const ANSWER_WITHIN_MS = 10 * 60_000;
/** How often a waiting question looks for a window still open to answer it. */
const WINDOW_CHECK_MS = 1000;

export function workbenchAsker(engine: EngineServer): ConsentAsker {
  const waiting = new Map<string, { req: ConsentRequest; answer: (ok: boolean) => void }>();
  const close = (id: string) => engine.broadcast({ event: 'consent', data: { id, origin: '', items: [], done: true } });
  const refuseAll = () => {
    for (const [id, w] of [...waiting]) {
      waiting.delete(id);
      w.answer(false);
      close(id);
    }
  };
  // A stop while the run waits at its question: the question is answered no (the job then ends
  // with a refusal), so the stop does not wait for a dialog nobody may answer.
  engine.on('runs.stop', async (p) => {
    refuseAll();
    await engine.runs!.stop(p.id);
    return null;
  });
  engine.on('consent.answer', (p) => {
    const w = waiting.get(p.id);
    if (!w) return { answered: false };
    waiting.delete(p.id);
    w.answer(p.approve);
    close(p.id);
    return { answered: true };
  });
  return (req) =>
    new Promise<boolean>((resolve, reject) => {
      if (engine.clientCount === 0)
        return reject(
          new ConsentRefused(
            `${req.origin} would run programs this workspace has not approved, and no workbench window is open to ask:\n${describeItems(req.items)}\nOpen the workbench, or approve them with the CLI's --yes.`,
            req.items,
          ),
        );
      const id = randomUUID();
      const timer = setTimeout(() => {
        waiting.delete(id);
        close(id);
        resolve(false);
      }, ANSWER_WITHIN_MS);
      timer.unref?.();
      // The last window closed: nobody is left to answer.
      const watch = setInterval(() => {
        if (engine.clientCount > 0 || !waiting.has(id)) return;
        waiting.delete(id);
        clearTimeout(timer);
        clearInterval(watch);
        resolve(false);
      }, WINDOW_CHECK_MS);
      watch.unref?.();
      waiting.set(id, {
        req,
        answer: (ok) => {
          clearTimeout(timer);
          clearInterval(watch);
          resolve(ok);
        },
      });
      engine.broadcast({
        event: 'consent',
        data: { id, origin: escapeControl(req.origin), items: req.items.map(({ kind, label }) => ({ kind, label: escapeControl(label) })) },
      });
    });
}
