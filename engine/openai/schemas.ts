/**
 * Request bodies of the OpenAI-compatible endpoint (zod). Every field the endpoint accepts has an
 * effect; a field it does not implement is refused by name (strict objects), as OpenAI refuses an
 * unknown parameter, instead of being silently ignored. Errors carry the field's dotted path.
 */
import { z } from 'zod';

const text = z.string();
/** Message content: a string, or a list of text parts (images and audio are refused by the part type). */
const content = z.union([text, z.array(z.strictObject({ type: z.literal('text'), text }))]);

const toolCall = z.strictObject({
  id: z.string(),
  type: z.literal('function').default('function'),
  // Any name, the empty one included: a call the model wrote (and the endpoint returned) is taken back as sent.
  function: z.strictObject({ name: z.string(), arguments: z.string() }),
});

const message = z.discriminatedUnion('role', [
  z.strictObject({ role: z.literal('system'), content, name: z.string().optional() }),
  z.strictObject({ role: z.literal('developer'), content, name: z.string().optional() }),
  z.strictObject({ role: z.literal('user'), content, name: z.string().optional() }),
  z.strictObject({
    role: z.literal('assistant'),
    content: content.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(toolCall).optional(),
    // Reasoning sent back by clients that keep it (vLLM's field); rendered as the template's think block when it has one.
    reasoning_content: z.string().nullish(),
  }),
  z.strictObject({ role: z.literal('tool'), content, tool_call_id: z.string() }),
]);

export const toolSchema = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

const toolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().min(1) }) }),
]);

const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish();

/** Sampling fields shared by both endpoints. */
const sampling = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  seed: z.number().int().nullish(),
  stop,
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullish(),
  /** vLLM's convention: prompt_token_ids and each choice's token_ids in the response. */
  return_token_ids: z.boolean().nullish(),
  user: z.string().optional(),
  /** Only the neutral values: Arbor samples from the policy's distribution as trained. */
  frequency_penalty: z.literal(0).nullish(),
  presence_penalty: z.literal(0).nullish(),
};

export const chatRequestSchema = z.strictObject({
  ...sampling,
  messages: z.array(message).min(1),
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  response_format: z.strictObject({ type: z.literal('text') }).nullish(),
});

export const completionRequestSchema = z.strictObject({
  ...sampling,
  /** One prompt: a string or token ids. */
  prompt: z.union([z.string(), z.array(z.number().int().min(0)).min(1)]),
  max_tokens: z.number().int().min(1).nullish(),
  /** Legacy form: the number of top tokens per position (0 = only the sampled token's logprob). */
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false).nullish(),
});

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessageIn = ChatRequest['messages'][number];
export type ToolIn = z.infer<typeof toolSchema>;
export type ToolChoice = z.infer<typeof toolChoice>;
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

/** An OpenAI-shaped error (the endpoint's every failure). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string = status === 401 ? 'authentication_error' : status === 404 ? 'not_found_error' : 'invalid_request_error',
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** Parse a body with a schema; a failure is a 400 naming the first offending field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const i = r.error.issues[0]!;
  let path = i.path.map(String).join('.');
  let msg = i.message;
  if (i.code === 'unrecognized_keys') {
    const keys = (i as { keys: string[] }).keys;
    path = [path, keys[0]].filter(Boolean).join('.');
    msg = `unsupported parameter${keys.length > 1 ? 's' : ''} ${keys.map((k) => `'${k}'`).join(', ')}`;
  }
  return raise(new ApiError(400, `${path || 'body'}: ${msg}`, 'invalid_request_error', path || null, i.code ?? null));
}

function raise(e: Error): never {
  throw e;
}
