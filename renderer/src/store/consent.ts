// Programs the engine asks the user to approve before it runs them (engine/server/consent.ts).
import type { ArborApi, ConsentPrompt } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends ConsentSlice {}
}

export interface ConsentSlice {
  consent: { prompts: ConsentPrompt[] };
  consentActions: {
    /** The engine asked a question, or withdrew it (answered elsewhere: `done`). */
    applyPrompt(c: ConsentPrompt): void;
    answer(id: string, approve: boolean): Promise<void>;
  };
}

export function createConsentSlice(api: ArborApi, set: Set, get: Get): ConsentSlice {
  const others = (id: string) => get().consent.prompts.filter((c) => c.id !== id);
  return {
    consent: { prompts: [] },
    consentActions: {
      applyPrompt: (c) => patchSlice(set, 'consent', { prompts: c.done ? others(c.id) : [...others(c.id), c] }),
      async answer(id, approve) {
        patchSlice(set, 'consent', { prompts: others(id) });
        await api.answerConsent?.(id, approve);
      },
    },
  };
}
