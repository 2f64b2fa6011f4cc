// The calculator's expression library against the published advisories of expr-eval 2.0.2:
// GHSA-8gw3-rxh4-v6jx (prototype pollution through `constructor`/`__proto__` in an expression) and
// CVE-2025-12735 / GHSA-jc85-fpwf-qm7x (a function in the variables object called by the
// expression). Both payloads are run against the parser itself (not only through the tool's
// character whitelist), and the tool still does arithmetic.
import { describe, expect, it } from 'vitest';
import { arithmeticParser, calculate, calculatorTool } from '../../../engine/env/calculator';

describe('calculator', () => {
  it('does arithmetic and refuses everything else', () => {
    expect(calculate('2 * (3 + 4) ^ 2 % 5')).toBe(3);
    expect(calculate('7 / 2')).toBe(3.5);
    expect(() => calculate('x + 1')).toThrow(/only numbers/);
    expect(calculatorTool.execute({ expression: '1/0' }, { signal: new AbortController().signal, episode: {}, readFile: () => '' })).toMatchObject({
      success: false,
    });
  });

  it('GHSA-8gw3-rxh4-v6jx: the prototype-pollution payload pollutes nothing', () => {
    const payload = 'Object=constructor;a=Object.fromEntries([["a","polluted"]]);Object.assign(__proto__, a)';
    expect(() => calculate(payload)).toThrow();
    expect(() => arithmeticParser.evaluate(payload)).toThrow();
    expect(() => arithmeticParser.evaluate('constructor.constructor("return process")()')).toThrow();
    expect(({} as Record<string, unknown>).a).toBeUndefined();
  });

  it('CVE-2025-12735: a function handed in the variables is not called', () => {
    let called = false;
    const exec = () => {
      called = true;
      return 1;
    };
    expect(() => arithmeticParser.evaluate('exec("id")', { exec })).toThrow();
    expect(() => arithmeticParser.evaluate('o.f()', { o: { f: exec } })).toThrow();
    expect(called).toBe(false);
  });
});
