import type { ArborApi, ChatMessage, Checkpoint } from '../api/types';
import { newChatId } from '../api/connection';
import type { Get, Set } from './state';

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

export interface PlaygroundSlice {
  checkpoints: Checkpoint[];
  checkpointId: string;
  transcript: TranscriptItem[];
  chatting: boolean;
  /** id of the chat being generated (for Stop) */
  chatId: string | null;
  /** what the checkpoint's search tool read in the last chat: a world seed or a dataset file */
  chatCorpus: string | null;
  /** The tools the last chat offered (name and source file), from the run's environment. */
  chatTools: { name: string; source: string }[];
  /** Tool-call format for the next chat ('' = the run's environment.format). */
  chatFormat: string;
  /** Sampling temperature of the chat (null: the run's eval.temperature). */
  chatTemperature: number | null;
  setChatTemperature(t: number | null): void;
  setChatFormat(format: string): void;
  loadCheckpoints(): Promise<void>;
  setCheckpoint(id: string): void;
  send(text: string): Promise<void>;
  /** Stop the running chat; it ends with the text generated so far. */
  stopChat(): Promise<void>;
  clearChat(): void;
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
  return {
    checkpoints: [],
    checkpointId: '',
    transcript: [],
    chatting: false,
    chatId: null,
    chatCorpus: null,
    chatTools: [],
    chatFormat: '',
    setChatFormat: (chatFormat) => set({ chatFormat }),
    chatTemperature: null,
    setChatTemperature: (chatTemperature) => set({ chatTemperature }),
    async loadCheckpoints() {
      try {
        const checkpoints = await api.listCheckpoints();
        set({ checkpoints, checkpointId: get().checkpointId || checkpoints[checkpoints.length - 1]?.id || '' });
      } catch (err) {
        get().reportError('Loading checkpoints', err);
      }
    },
    // Another checkpoint is another model: the conversation (and any live episode) starts over.
    setCheckpoint(checkpointId) {
      if (checkpointId === get().checkpointId) return;
      set({ checkpointId, transcript: [], chatCorpus: null, chatTools: [] });
      void get().closeLive();
    },
    clearChat: () => set({ transcript: [] }),
    async send(text) {
      const s = get();
      if (!s.checkpointId || s.chatting) return;
      const transcript: TranscriptItem[] = [...s.transcript, { kind: 'user', text }];
      const chatId = newChatId();
      set({ transcript, chatting: true, chatId });
      const push = (it: TranscriptItem) => set({ transcript: [...get().transcript, it] });
      try {
        const r = await api.chat(
          {
            checkpoint: s.checkpointId,
            messages: transcriptToMessages(transcript),
            chatId,
            ...(s.chatFormat ? { format: s.chatFormat } : {}),
            ...(s.chatTemperature !== null ? { temperature: s.chatTemperature } : {}),
          },
          (e) => {
            const items = get().transcript;
            const last = items[items.length - 1];
            if (e.type === 'token') {
              if (last?.kind === 'assistant' && !last.done) set({ transcript: [...items.slice(0, -1), { ...last, text: last.text + e.text }] });
              else push({ kind: 'assistant', text: e.text, done: false });
            } else if (e.type === 'turn') {
              // The exact text of the finished turn replaces what was streamed.
              if (last?.kind === 'assistant' && !last.done) set({ transcript: [...items.slice(0, -1), { ...last, text: e.text, done: true }] });
              else push({ kind: 'assistant', text: e.text, done: true });
            } else if (e.type === 'tool_call') {
              if (last?.kind === 'assistant') set({ transcript: [...items.slice(0, -1), { ...last, done: true }] });
              push({ kind: 'tool_call', name: e.name, args: e.args });
            } else if (e.type === 'observation') {
              push({ kind: 'observation', name: e.name, content: e.content, error: e.error });
            } else if (e.type === 'done') {
              if (last?.kind === 'assistant') set({ transcript: [...items.slice(0, -1), { ...last, done: true }] });
              if (e.stopped) push({ kind: 'note', text: 'Stopped: the answer above is what the model had generated so far.' });
              else if (e.reason && /limit/.test(e.reason)) push({ kind: 'note', text: `The model ${e.reason}.` });
            }
            // 'error' events also fail the request; the catch below shows them once.
          },
        );
        set({
          chatTools: r.tools ?? [],
          chatCorpus:
            [r.dataset ? `dataset ${r.dataset}` : r.world !== undefined ? `world seed ${r.world}` : null, r.format ? `format ${r.format}` : null]
              .filter(Boolean)
              .join(', ') || null,
        });
      } catch (err) {
        push({ kind: 'error', message: get().reportError('Playground', err) });
      } finally {
        set({ chatting: false, chatId: null });
      }
    },
    async stopChat() {
      const { chatId } = get();
      if (!chatId) return;
      try {
        await api.cancelChat(chatId);
      } catch (err) {
        get().reportError('Stopping the chat', err);
      }
    },
  };
}
