/**
 * `arbor serve-model`'s model side: a model folder, a checkpoint (an HF folder, or a PEFT LoRA
 * adapter folder, served on its base: PolicyModel.load), or a run (its id or folder: its latest
 * checkpoint) → the policy model, its tokenizer and chat template, the KV-cache decode backend and
 * the request source (./requests.ts) behind a ModelServer.
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { PolicyModel } from '../model/runtime';
import { HfTokenizer } from '../model/tokenizer';
import { eosTokenIds, policyDecodeBackend } from '../rollout/model-backend';
import type { DecodeBackend } from '../rollout/ports';
import { resolveProviders } from '../tensor/ort';
import { latestCheckpoint } from '../train/checkpoints';
import { episodeTrajectories, EpisodeRecorder } from './episodes';
import { turnStopIds } from './chat';
import { RequestSource } from './requests';
import { emptySafe, ModelServer, type ModelServerOptions } from './server';

export interface ServeModelOptions {
  port?: number;
  apiKey?: string;
  device?: string;
  threads?: number;
  /** Most requests decoded together (default 64). */
  maxBatch?: number;
  /** The model name clients pass (default: the folder's name). */
  name?: string;
  log?: ModelServerOptions['log'];
  /**
   * Record every call and write the conversations as trajectories (JSONL, `arbor rollout`'s
   * format: promptIds, turns with token ids, loss masks and logprobs) to this file at close: SFT
   * demonstrations (sft.demos_path) from any agent run against the endpoint.
   */
  record?: string;
}

/** A model folder, checkpoint or run → the folder to load (a run: its latest checkpoint). */
export async function resolveModelFolder(arg: string): Promise<string> {
  const p = resolve(arg);
  if (existsSync(p) && statSync(p).isDirectory()) {
    if (existsSync(join(p, 'config.json')) || existsSync(join(p, 'adapter_config.json'))) return p;
    // A run folder: its latest RL checkpoint, else its SFT warm start's.
    const ck = latestCheckpoint(p) ?? latestCheckpoint(join(p, 'sft'));
    if (ck) return ck.dir;
    throw new Error(`${arg}: not a model folder (no config.json or adapter_config.json) and not a run folder with checkpoints`);
  }
  const { openRun } = await import('../run/run-dir');
  let run: { id: string; dir: string };
  try {
    run = openRun(arg);
  } catch {
    throw new Error(`${arg}: no such model folder, checkpoint or run`);
  }
  const ck = latestCheckpoint(run.dir) ?? latestCheckpoint(join(run.dir, 'sft'));
  if (!ck) throw new Error(`run ${run.id} (${run.dir}) has no checkpoint yet`);
  return ck.dir;
}

export interface ServedModel {
  server: ModelServer;
  model: PolicyModel;
  backend: DecodeBackend;
  folder: string;
  url: string;
  close(): Promise<void>;
}

export async function serveModel(arg: string, o: ServeModelOptions = {}): Promise<ServedModel> {
  const folder = await resolveModelFolder(arg);
  const providers = await resolveProviders(o.device ?? 'auto');
  const model = PolicyModel.load(folder, { threads: o.threads, providers });
  try {
    const tokFolder = model.opts.tokenizerFolder ?? folder;
    const hf = HfTokenizer.load(tokFolder);
    if (!hf.chatTemplate) throw new Error(`${tokFolder}: tokenizer_config.json has no chat_template (the endpoint renders chats with it)`);
    // decode([]) = '' (a completion that is only its stop token has no visible ids).
    const tok = emptySafe(hf);
    const maxBatch = o.maxBatch ?? 64;
    const backend = policyDecodeBackend(model, { maxBatch });
    const requests = new RequestSource(backend, (ids) => tok.decode(ids), maxBatch);
    const recorder = o.record ? new EpisodeRecorder() : undefined;
    const server = new ModelServer({
      ...(recorder ? { recorder } : {}),
      modelId: o.name ?? basename(folder),
      tokenizer: tok,
      requests,
      stopTokenIds: turnStopIds(hf, eosTokenIds(model.config)),
      apiKey: o.apiKey,
      port: o.port,
      log: o.log,
    });
    const url = await server.listen();
    return {
      server,
      model,
      backend,
      folder,
      url,
      async close() {
        await server.close();
        await requests.close();
        if (recorder && o.record) writeRecorded(o.record, recorder, (ids) => tok.decode(ids));
        await backend.close?.();
        await model.dispose();
      },
    };
  } catch (e) {
    await model.dispose();
    throw e;
  }
}

/** The recorded calls as trajectories (one per conversation path), one JSON per line. */
export function writeRecorded(file: string, rec: EpisodeRecorder, decode: (ids: number[]) => string): number {
  const ts = episodeTrajectories(rec.calls, { taskId: 'serve-model', group: 0, firstSample: 0, seed: 0, outcome: { reward: 0, components: {} }, decode });
  mkdirSync(dirname(resolve(file)), { recursive: true });
  writeFileSync(file, ts.map((t) => JSON.stringify(t)).join('\n') + (ts.length ? '\n' : ''));
  return ts.length;
}
