// The Playground view's chat with a checkpoint: the checkpoints to pick from, the transcript as it
// streams, and what the chat used (its corpus, tools, format and temperature).
import type { ArborApi, ChatMessage, Checkpoint } from '../api/types';
import { newChatId } from '../api/connection';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends PlaygroundSlice {}
}

/** One entry of the transcript as shown: messages plus tool calls/observations as they happen. */
export type TranscriptItem =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string; done: boolean }
  | { kind: 'tool_call'; name: string; args: unknown }
  | { kind: 'observation'; name: string; content: string; error?: string }
  | { kind: 'note'; text: string }
  | { kind: 'error'; message: string };

export interface PlaygroundState {
  checkpoints: Checkpoint[];
  checkpointId: string;
  transcript: TranscriptItem[];
  chatting: boolean;
  /** id of the chat being generated (for Stop) */
  chatId: string | null;
  /** what the checkpoint's search tool read in the last chat: a world seed or a dataset file */
  corpus: string | null;
  /** The tools the last chat offered (name and source file), from the run's environment. */
  tools: { name: string; source: string }[];
  /** Tool-call format for the next chat ('' = the run's environment.format). */
  format: string;
  /** Sampling temperature of the chat (null: the run's eval.temperature). */
  temperature: number | null;
}

export interface PlaygroundSlice {
  playground: PlaygroundState;
  playgroundActions: {
    setTemperature(t: number | null): void;
    setFormat(format: string): void;
    loadCheckpoints(): Promise<void>;
    setCheckpoint(id: string): void;
    send(text: string): Promise<void>;
    /** Stop the running chat; it ends with the text generated so far. */
    stop(): Promise<void>;
    clear(): void;
  };
}

/** The chat history sent to the engine, rebuilt from the transcript. */
export function transcriptToMessages(items: TranscriptItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const it of items) {
    if (it.kind === 'user') out.push({ role: 'user', content: it.text });
    else if (it.kind === 'assistant') out.push({ role: 'assistant', content: it.text });
    else if (it.kind === 'observation') out.push({ role: 'tool', name: it.name, content: it.content });
  }
  return out;
}

export function createPlaygroundSlice(api: ArborApi, set: Set, get: Get): PlaygroundSlice {
  const patch = (p: Partial<PlaygroundState>) => patchSlice(set, 'playground', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  return {
    playground: {
      checkpoints: [],
      checkpointId: '',
      transcript: [],
      chatting: false,
      chatId: null,
      corpus: null,
      tools: [],
      format: '',
      temperature: null,
    },
    playgroundActions: {
      setFormat: (format) => patch({ format }),
      setTemperature: (temperature) => patch({ temperature }),
      async loadCheckpoints() {
        try {
          const checkpoints = await api.listCheckpoints();
          patch({ checkpoints, checkpointId: get().playground.checkpointId || checkpoints[checkpoints.length - 1]?.id || '' });
        } catch (err) {
          report('Loading checkpoints', err);
        }
      },
      // Another checkpoint is another model: the conversation (and any live episode) starts over.
      setCheckpoint(checkpointId) {
        if (checkpointId === get().playground.checkpointId) return;
        patch({ checkpointId, transcript: [], corpus: null, tools: [] });
        void get().liveActions.close();
      },
      clear: () => patch({ transcript: [] }),
      async send(text) {
        const s = get().playground;
        if (!s.checkpointId || s.chatting) return;
        const transcript: TranscriptItem[] = [...s.transcript, { kind: 'user', text }];
        const chatId = newChatId();
        patch({ transcript, chatting: true, chatId });
        const push = (it: TranscriptItem) => patch({ transcript: [...get().playground.transcript, it] });
        try {
          const r = await api.chat(
            {
              checkpoint: s.checkpointId,
              messages: transcriptToMessages(transcript),
              chatId,
              ...(s.format ? { format: s.format } : {}),
              ...(s.temperature !== null ? { temperature: s.temperature } : {}),
            },
            (e) => {
              const items = get().playground.transcript;
              const last = items[items.length - 1];
              if (e.type === 'token') {
                if (last?.kind === 'assistant' && !last.done) patch({ transcript: [...items.slice(0, -1), { ...last, text: last.text + e.text }] });
                else push({ kind: 'assistant', text: e.text, done: false });
              } else if (e.type === 'turn') {
                // The exact text of the finished turn replaces what was streamed.
                if (last?.kind === 'assistant' && !last.done) patch({ transcript: [...items.slice(0, -1), { ...last, text: e.text, done: true }] });
                else push({ kind: 'assistant', text: e.text, done: true });
              } else if (e.type === 'tool_call') {
                if (last?.kind === 'assistant') patch({ transcript: [...items.slice(0, -1), { ...last, done: true }] });
                push({ kind: 'tool_call', name: e.name, args: e.args });
              } else if (e.type === 'observation') {
                push({ kind: 'observation', name: e.name, content: e.content, error: e.error });
              } else if (e.type === 'done') {
                if (last?.kind === 'assistant') patch({ transcript: [...items.slice(0, -1), { ...last, done: true }] });
                if (e.stopped) push({ kind: 'note', text: 'Stopped: the answer above is what the model had generated so far.' });
                else if (e.reason && /limit/.test(e.reason)) push({ kind: 'note', text: `The model ${e.reason}.` });
              }
              // 'error' events also fail the request; the catch below shows them once.
            },
          );
          patch({
            tools: r.tools ?? [],
            corpus:
              [r.dataset ? `dataset ${r.dataset}` : r.world !== undefined ? `world seed ${r.world}` : null, r.format ? `format ${r.format}` : null]
                .filter(Boolean)
                .join(', ') || null,
          });
        } catch (err) {
          push({ kind: 'error', message: report('Playground', err) });
        } finally {
          patch({ chatting: false, chatId: null });
        }
      },
      async stop() {
        const { chatId } = get().playground;
        if (!chatId) return;
        try {
          await api.cancelChat(chatId);
        } catch (err) {
          report('Stopping the chat', err);
        }
      },
    },
  };
}
