/**
 * A mock OpenAI-compatible judge on 127.0.0.1: `/v1/chat/completions` answers from a script
 * (malformed JSON, HTTP errors such as 429, a delay past the client's timeout), then from a
 * default that scores each trajectory by its content, so the same trajectory gets the same score
 * in any order. Every request's body is recorded.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedAnswer {
  status?: number;
  /** The assistant message's content (wrapped in a chat completion), or with `raw` the whole body. */
  content?: string;
  raw?: string;
  delayMs?: number;
  headers?: Record<string, string>;
}

export interface JudgeRequest {
  model: string;
  messages: { role: string; content: string }[];
  max_tokens?: number;
  temperature?: number;
  authorization?: string;
}

/** A content score in [0, 1]: the share of "good" among the transcript's words (what the test trajectories vary). */
export const contentScore = (transcript: string): number => {
  const words = transcript.split(/\s+/).filter((w) => /^\w+$/.test(w));
  return words.length ? Math.round((100 * words.filter((w) => w === 'good').length) / words.length) / 100 : 0;
};

/** The default answer: rank mode (<trajectory i> blocks) or score mode, each trajectory scored by contentScore. */
export function defaultAnswer(req: JudgeRequest): string {
  const user = req.messages.find((m) => m.role === 'user')?.content ?? '';
  const blocks = [...user.matchAll(/<trajectory (\d+)>\n([\s\S]*?)\n<\/trajectory \1>/g)];
  if (blocks.length)
    return JSON.stringify({ scores: blocks.map((b) => ({ trajectory: Number(b[1]), explanation: 'counted good words', score: contentScore(b[2]!) })) });
  const t = user.split('Trajectory:\n')[1] ?? '';
  return JSON.stringify({ explanation: 'counted good words', score: contentScore(t) });
}

export class MockJudge {
  readonly requests: JudgeRequest[] = [];
  readonly script: ScriptedAnswer[] = [];
  private server: Server;
  url = '';

  constructor(private readonly fallback: (req: JudgeRequest) => string = defaultAnswer) {
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => {
        const parsed = JSON.parse(body) as JudgeRequest;
        if (req.headers.authorization) parsed.authorization = req.headers.authorization;
        this.requests.push(parsed);
        const a = this.script.shift() ?? {};
        const send = () => {
          if (res.destroyed) return;
          const content = a.content ?? this.fallback(parsed);
          const text =
            a.raw ??
            JSON.stringify({
              id: `c${this.requests.length}`,
              object: 'chat.completion',
              choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
              usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
            });
          res.writeHead(a.status ?? 200, { 'content-type': 'application/json', ...a.headers });
          res.end(text);
        };
        if (a.delayMs) setTimeout(send, a.delayMs);
        else send();
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
    return this.url;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
