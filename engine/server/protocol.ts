/**
 * The engine protocol, defined once and checked at runtime at the boundary (zod).
 * Wire format (JSON, over MessagePort, stdio lines or WebSocket):
 *   request  { id: number, method: string, params?: object }
 *   response { id, result } | { id, error: { message, code?, details? } }
 *   event    { event: string, data: object }
 * No Node imports here: the renderer uses this file too.
 */
import { z } from 'zod';

export const requestSchema = z.object({
  id: z.number().int(),
  method: z.string().min(1),
  params: z.unknown().optional(),
});
export type Request = z.infer<typeof requestSchema>;

const id = z.object({ id: z.string().min(1) });
const runId = z.object({ runId: z.string().min(1) });

/** Parameters of every method; a method not listed here does not exist. */
export const methods = {
  'engine.info': z.object({}).optional(),
  'workspace.open': z.object({ path: z.string().min(1) }),
  'templates.list': z.object({}).optional(),
  'runs.list': z.object({ status: z.string().optional(), tag: z.string().optional(), search: z.string().optional(), sort: z.string().optional(), desc: z.boolean().optional() }).optional(),
  'runs.get': id,
  'runs.start': z.object({ template: z.string().min(1), config: z.record(z.string(), z.unknown()), name: z.string().optional(), tags: z.array(z.string()).optional() }),
  'runs.stop': id,
  'runs.pause': id,
  'runs.resume': id,
  'runs.fork': z.object({ id: z.string().min(1), checkpoint: z.string().optional(), config: z.record(z.string(), z.unknown()).optional(), name: z.string().optional() }),
  'runs.delete': id,
  'runs.log': z.object({ runId: z.string().min(1), afterSeq: z.number().int().optional() }),
  'runs.diff': z.object({ ids: z.array(z.string()).min(2) }),
  'metrics.series': z.object({ runId: z.string().min(1), keys: z.array(z.string()).optional(), maxPoints: z.number().int().positive().max(20000).optional() }),
  'trajectories.steps': runId,
  'trajectories.list': z.object({ runId: z.string().min(1), step: z.number().int().optional(), minReward: z.number().optional(), maxReward: z.number().optional(), errorsOnly: z.boolean().optional(), task: z.string().optional() }),
  'trajectories.get': id,
  'trajectories.group': z.object({ runId: z.string().min(1), step: z.number().int(), group: z.number().int() }),
  'checkpoints.list': z.object({ runId: z.string().optional() }).optional(),
  'env.files': z.object({}).optional(),
  'env.read': z.object({ path: z.string().min(1) }),
  'env.write': z.object({ path: z.string().min(1), text: z.string() }),
  'env.types': z.object({}).optional(),
  'sandbox.tryTool': z.object({ source: z.string(), path: z.string().optional(), tool: z.string().optional(), args: z.unknown() }),
  'sandbox.tryReward': z.object({ source: z.string(), path: z.string().optional(), trajectoryId: z.string().min(1) }),
  'playground.chat': z.object({ checkpoint: z.string().min(1), messages: z.array(z.object({ role: z.string(), content: z.string(), name: z.string().optional() })), tools: z.array(z.string()).optional(), chatId: z.string().optional() }),
  'playground.cancel': z.object({ chatId: z.string().min(1) }),
} as const;

export type Method = keyof typeof methods;
export type Params<M extends Method> = z.infer<(typeof methods)[M]>;

/** Events the engine pushes. */
export type EngineEventName = 'run' | 'metrics' | 'log' | 'trajectories' | 'checkpoint' | 'queue' | 'chat' | 'engine';

export interface ProtocolError { message: string; code?: string; details?: unknown }

export function isMethod(m: string): m is Method {
  return Object.prototype.hasOwnProperty.call(methods, m);
}
