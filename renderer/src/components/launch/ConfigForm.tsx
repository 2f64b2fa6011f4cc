import './launch.css';
import type { Template } from '../../api/types';
import { SchemaForm } from '../SchemaForm';
import { ModelPicker } from '../ModelPicker';

/** The launch form's fields: the essentials (model, task, algorithm, steps) first, everything else under "advanced", collapsed. */
export function ConfigForm({
  schema,
  essential,
  config,
  setConfig,
}: {
  schema: Template['schema'];
  /** The essential paths the template's schema has (launchConfig.ts essentialPaths). */
  essential: string[];
  config: Record<string, unknown>;
  setConfig: (c: Record<string, unknown>) => void;
}) {
  return (
    <>
      {essential.includes('model.path') ? (
        <ModelPicker
          value={(config.model as { path?: string } | undefined)?.path}
          onPick={(m) => {
            // model.path and model.init are one choice: a picked model replaces the tiny built-in one.
            const { init: _init, ...model } = (config.model as Record<string, unknown> | undefined) ?? {};
            setConfig({ ...config, model: { ...model, path: m.name } });
          }}
          testId="launch-model"
        />
      ) : null}
      <SchemaForm schema={schema} value={config} onChange={setConfig} only={essential} testId="schema-form-essential" />
      <details className="launch-advanced" data-testid="launch-advanced">
        <summary>advanced: every other setting</summary>
        <SchemaForm schema={schema} value={config} onChange={setConfig} omit={[...essential, 'name']} />
      </details>
    </>
  );
}
