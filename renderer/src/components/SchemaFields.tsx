// The schema form's fields: an object's fields (Fields) and one field of the right kind (Field), which
// nest into each other for nested objects, so the two live together.
import { useState } from 'react';
import { fieldKind, getPath, setPath, unwrap, type JsonSchema } from '../lib/jsonSchema';

/** Whether the field at `path` is shown under only/omit (an object is shown when a picked path lies inside it). */
export function fieldShown(path: string, only?: string[], omit?: string[]): boolean {
  if (omit?.some((o) => path === o || path.startsWith(`${o}.`))) return false;
  if (!only) return true;
  return only.some((o) => path === o || path.startsWith(`${o}.`) || o.startsWith(`${path}.`));
}

/** The fields of one object of the schema, those `only`/`omit` leave shown. */
export function Fields({
  schema,
  root,
  path,
  value,
  onChange,
  only,
  omit,
}: {
  schema: JsonSchema;
  root: JsonSchema;
  path: string[];
  value: unknown;
  onChange: (v: Record<string, unknown>) => void;
  only?: string[];
  omit?: string[];
}) {
  const props = Object.entries(schema.properties ?? {}).filter(([name]) => fieldShown([...path, name].join('.'), only, omit));
  return (
    <>
      {props.map(([name, sub]) => {
        const p = [...path, name];
        const s = unwrap(sub, root);
        const kind = fieldKind(s, root);
        if (kind === 'object') {
          return (
            <fieldset key={name}>
              <legend>
                {name}
                {s.description ? <span className="desc">{s.description}</span> : null}
              </legend>
              <Fields schema={s} root={root} path={p} value={value} onChange={onChange} only={only} omit={omit} />
            </fieldset>
          );
        }
        return (
          <Field key={name} name={name} path={p} schema={s} root={root} kind={kind} current={getPath(value, p)} set={(v) => onChange(setPath(value, p, v))} />
        );
      })}
    </>
  );
}

/** One field: an input of the kind its schema gives, with its default and description; a nested object's Fields; JSON for what the form does not understand. */
function Field({
  name,
  path,
  schema,
  root,
  kind,
  current,
  set,
}: {
  name: string;
  path: string[];
  schema: JsonSchema;
  root: JsonSchema;
  kind: ReturnType<typeof fieldKind>;
  current: unknown;
  set: (v: unknown) => void;
}) {
  const id = `cfg-${path.join('.')}`;
  const [jsonText, setJsonText] = useState(() => (current === undefined ? '' : JSON.stringify(current)));
  const [jsonError, setJsonError] = useState<string | null>(null);
  let input: React.ReactNode;
  // Empty fields take the schema default; show it so the form says what will run.
  const dflt = schema.default;
  const placeholder = dflt === undefined || dflt === null ? undefined : Array.isArray(dflt) ? dflt.join(', ') : String(dflt);
  switch (kind) {
    case 'enum': {
      const options = schema.enum ?? [schema.const];
      input = (
        <select
          id={id}
          value={current === undefined ? '' : JSON.stringify(current)}
          onChange={(e) => set(e.target.value === '' ? undefined : JSON.parse(e.target.value))}
        >
          <option value="">{placeholder === undefined ? '(default)' : `(default: ${placeholder})`}</option>
          {options.map((o) => (
            <option key={JSON.stringify(o)} value={JSON.stringify(o)}>
              {String(o)}
            </option>
          ))}
        </select>
      );
      break;
    }
    case 'boolean':
      input = <input id={id} type="checkbox" checked={current === undefined ? dflt === true : current === true} onChange={(e) => set(e.target.checked)} />;
      break;
    case 'number':
    case 'integer':
      input = (
        <input
          id={id}
          type="number"
          step={kind === 'integer' ? 1 : 'any'}
          min={schema.minimum}
          max={schema.maximum}
          value={typeof current === 'number' ? current : ''}
          placeholder={placeholder}
          onChange={(e) => set(e.target.value === '' ? undefined : Number(e.target.value))}
          style={{ width: 120 }}
        />
      );
      break;
    case 'string':
      input = (
        <input
          id={id}
          type="text"
          value={typeof current === 'string' ? current : ''}
          placeholder={placeholder}
          onChange={(e) => set(e.target.value === '' ? undefined : e.target.value)}
          style={{ width: 260 }}
        />
      );
      break;
    case 'scalar-array': {
      const itemKind = fieldKind(schema.items!, root);
      const text = Array.isArray(current) ? current.join(', ') : '';
      input = (
        <input
          id={id}
          type="text"
          defaultValue={text}
          placeholder={placeholder ?? 'comma-separated'}
          onBlur={(e) => {
            const parts = e.target.value
              .split(',')
              .map((x) => x.trim())
              .filter(Boolean);
            set(parts.length === 0 ? undefined : parts.map((x) => (itemKind === 'number' || itemKind === 'integer' ? Number(x) : x)));
          }}
          style={{ width: 200 }}
        />
      );
      break;
    }
    default:
      input = (
        <>
          <input
            id={id}
            type="text"
            className="mono"
            value={jsonText}
            placeholder="JSON"
            onChange={(e) => {
              setJsonText(e.target.value);
              if (e.target.value.trim() === '') {
                setJsonError(null);
                set(undefined);
                return;
              }
              try {
                set(JSON.parse(e.target.value));
                setJsonError(null);
              } catch (err) {
                setJsonError((err as Error).message);
              }
            }}
            style={{ width: 260 }}
          />
          {jsonError ? (
            <span className="desc" style={{ color: 'var(--err)' }}>
              {jsonError}
            </span>
          ) : null}
        </>
      );
  }
  return (
    <>
      <label htmlFor={id} title={path.join('.')}>
        {name}
      </label>
      <div className="field">
        {input}
        {schema.description ? <span className="desc">{schema.description}</span> : null}
      </div>
    </>
  );
}
