/**
 * The workbench's consent dialog, engine side: the asker `arbor serve` and the Electron engine
 * install (engine/env/consent.ts). A request is pushed to every connected window as a `consent`
 * event; the first `consent.answer` decides, and a `consent` event with `done` closes the dialog
 * everywhere. With no window connected, or no answer within 10 minutes, the answer is no.
 */
import { randomUUID } from 'node:crypto';
import { ConsentRefused, describeItems, type ConsentAsker, type ConsentRequest } from '../env/consent';
import type { EngineServer } from './server';

const ANSWER_WITHIN_MS = 10 * 60_000;

export function workbenchAsker(engine: EngineServer): ConsentAsker {
  const waiting = new Map<string, { req: ConsentRequest; answer: (ok: boolean) => void }>();
  const close = (id: string) => engine.broadcast({ event: 'consent', data: { id, origin: '', items: [], done: true } });
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
      waiting.set(id, {
        req,
        answer: (ok) => {
          clearTimeout(timer);
          resolve(ok);
        },
      });
      engine.broadcast({ event: 'consent', data: { id, origin: req.origin, items: req.items.map(({ kind, label }) => ({ kind, label })) } });
    });
}
