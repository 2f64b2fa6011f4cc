// The start-run form, generated from the template's config JSON schema. Each field is an input
// of the right kind with its default and description; fields the generator does not understand
// (unions, nested arrays of objects) are edited as JSON. A "JSON" toggle edits the whole config.
import { unwrap, type JsonSchema } from '../lib/jsonSchema';
import { Fields } from './SchemaFields';

interface Props {
  schema: JsonSchema;
  value: unknown;
  onChange: (v: Record<string, unknown>) => void;
  /** Dotted paths to show (with what is under them); absent: every field. */
  only?: string[];
  /** Dotted paths to leave out (with what is under them). */
  omit?: string[];
  testId?: string;
}

export function SchemaForm({ schema, value, onChange, only, omit, testId = 'schema-form' }: Props) {
  const root = unwrap(schema, schema);
  return (
    <div className="form" data-testid={testId}>
      <Fields schema={root} root={schema} path={[]} value={value} onChange={onChange} only={only} omit={omit} />
    </div>
  );
}
