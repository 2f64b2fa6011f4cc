/**
 * The checks every local HTTP server of Arbor makes before it looks at a request (`arbor serve`,
 * `arbor mcp serve --http`, `arbor serve-model`): the Host header must be a loopback name (DNS
 * rebinding: a page on evil.example that resolves to 127.0.0.1 still sends `Host: evil.example`),
 * an Origin, when the browser sends one, must be the server's own, and tokens are compared in
 * constant time. One implementation, used by all of them.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Host names a loopback server answers to: localhost, 127.0.0.0/8 and [::1], with or without a port. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.trim().toLowerCase();
  const name = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.replace(/:\d+$/, '');
  if (name === 'localhost' || name === '[::1]') return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(name);
  return !!m && m.slice(1).every((x) => Number(x) <= 255);
}

/** An Origin header is acceptable when absent (not a browser, or a same-origin GET) or a loopback origin on `port`. */
export function isOwnOrigin(origin: string | undefined, port: number): boolean {
  if (origin === undefined) return true;
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return false;
  }
  if (u.protocol !== 'http:') return false;
  return isLoopbackHost(u.host) && Number(u.port || 80) === port;
}

/** Constant-time string comparison (hashing first, so lengths do not leak either). */
export function safeEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b) && given.length === expected.length;
}

/** Why a request is refused before routing (Host or Origin), or undefined when it may go on. */
export function refusal(req: IncomingMessage, port: number): string | undefined {
  if (!isLoopbackHost(req.headers.host)) return `Host ${JSON.stringify(req.headers.host ?? '')} is not a loopback name`;
  const origin = req.headers.origin;
  if (!isOwnOrigin(typeof origin === 'string' ? origin : undefined, port)) return `Origin ${JSON.stringify(origin)} is not this server's`;
  return undefined;
}

/** Refuse (403, plain text) a request with a foreign Host or Origin; true when it may go on. */
export function guardRequest(req: IncomingMessage, res: ServerResponse, port: number): boolean {
  const why = refusal(req, port);
  if (!why) return true;
  res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end(`forbidden: ${why}\n`);
  return false;
}

/** decodeURIComponent that returns undefined for a malformed escape instead of throwing (`/%ff`). */
export function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** Raw answers for a socket the HTTP parser gave up on (the servers' `clientError` handlers). */
export const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
export const HEADERS_TOO_LARGE = 'HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
