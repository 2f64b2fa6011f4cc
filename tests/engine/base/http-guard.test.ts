import { describe, expect, it } from 'vitest';
import { isLoopbackHost, isOwnOrigin, safeDecode, safeEqual } from '../../../engine/base/http-guard';

describe('http-guard', () => {
  it('accepts loopback Host names only', () => {
    for (const h of ['127.0.0.1:8080', 'localhost', 'LOCALHOST:1', '[::1]:3000', '127.1.2.3']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of [undefined, '', 'evil.example', 'evil.example:8080', '127.0.0.1.evil.example', '128.0.0.1', '[::2]:80', '127.0.0.300', 'localhost.evil'])
      expect(isLoopbackHost(h), String(h)).toBe(false);
  });
  it('accepts no Origin, or the server’s own loopback origin', () => {
    expect(isOwnOrigin(undefined, 8080)).toBe(true);
    expect(isOwnOrigin('http://127.0.0.1:8080', 8080)).toBe(true);
    expect(isOwnOrigin('http://localhost:8080', 8080)).toBe(true);
    expect(isOwnOrigin('http://127.0.0.1:8081', 8080)).toBe(false);
    expect(isOwnOrigin('http://evil.example', 8080)).toBe(false);
    expect(isOwnOrigin('null', 8080)).toBe(false);
    expect(isOwnOrigin('https://127.0.0.1:8080', 8080)).toBe(false);
  });
  it('compares tokens exactly and decodes malformed escapes to undefined', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('ab', 'abc')).toBe(false);
    expect(safeDecode('/%ff')).toBeUndefined();
    expect(safeDecode('/a%20b')).toBe('/a b');
  });
});
