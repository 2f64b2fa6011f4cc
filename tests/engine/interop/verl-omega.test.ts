// tool_config.yaml is read by verl through OmegaConf, which resolves `${…}` in any string (issue 37,
// item 8: a tool description holding `${oc.env:VAR}` was resolved). omegaLiteral escapes every
// string so OmegaConf reads back exactly the text, whatever backslashes precede the `${`.
import { parse as parseYaml, stringify as yamlStringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { omegaLiteral } from '../../../engine/interop/verl-export';

/** OmegaConf's reading of a string's escapes: n backslashes before `${` are n/2 literal ones, and an odd one makes the `${` literal. */
function omegaRead(s: string): { text: string; interpolates: boolean } {
  let interpolates = false;
  const text = s.replace(/(\\*)\$\{/g, (_m, bs: string) => {
    if (bs.length % 2 === 0) interpolates = true;
    return `${'\\'.repeat(Math.floor(bs.length / 2))}\${`;
  });
  return { text, interpolates };
}

describe("verl's YAML: no interpolation from a tool's strings", () => {
  it.each(['look up ${oc.env:HF_TOKEN}', 'a \\${x} and \\\\${oc.env:HOME}', '${a}${b}', 'plain text', '$HOME {x}'])('%s reads back as written', (text) => {
    const doc = { tools: [{ tool_schema: { function: { description: text, parameters: { properties: { q: { description: text, enum: [text] } } } } } }] };
    const back = parseYaml(yamlStringify(omegaLiteral(doc))) as typeof doc;
    const fn = back.tools[0]!.tool_schema.function;
    for (const s of [fn.description, fn.parameters.properties.q.description, fn.parameters.properties.q.enum[0]!]) {
      const r = omegaRead(s);
      expect(r.interpolates).toBe(false);
      expect(r.text).toBe(text);
    }
    // Numbers, booleans and keys are left as they are.
    expect(omegaLiteral({ 'k${x}': 1, b: true })).toEqual({ 'k${x}': 1, b: true });
  });
});
