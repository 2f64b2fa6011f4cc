import { defaultsOf, unwrap, type JsonSchema } from '../../lib/jsonSchema';

/** The launch form's essential fields (those the template's schema has): model, task, algorithm, steps. */
const ESSENTIAL = ['model.path', 'model.init', 'task.kind', 'task.dataset', 'algorithm.adv_estimator', 'steps'];
export function essentialPaths(schema: JsonSchema): string[] {
  const has = (path: string): boolean => {
    let s: JsonSchema | undefined = unwrap(schema, schema);
    for (const part of path.split('.')) {
      s = s?.properties?.[part];
      if (!s) return false;
      s = unwrap(s, schema);
    }
    return true;
  };
  return ESSENTIAL.filter(has);
}

/** A new run's starting config: the template's example, else its schema's defaults. */
export function initialConfig(t: { schema: Parameters<typeof defaultsOf>[0]; example?: Record<string, unknown> } | undefined): Record<string, unknown> {
  if (!t) return {};
  if (t.example) return structuredClone(t.example);
  const d = defaultsOf(t.schema);
  return d && typeof d === 'object' ? (d as Record<string, unknown>) : {};
}
