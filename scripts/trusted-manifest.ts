/**
 * The manifest of Arbor's own examples (resources/trusted-manifest.json): the consent item hashes
 * of what its shipped configs would run (tool and reward files by content, the example agent by
 * its argv, folder, variables and script, workspace folders), with paths inside Arbor's package
 * written relative to it. engine/env/consent.ts trusts exactly these hashes: a changed example, or
 * anything else placed in resources/, is asked about like any other file.
 * `node scripts/gen-trusted-manifest.mjs` writes it; tests/engine/env/consent-rule.test.ts
 * checks it is current.
 */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import '../engine/builtins'; // the built-in estimators, losses, formats and task kinds, before a config is read
import { loadConfig } from '../engine/config/experiment';
import { configItems, packageRoot } from '../engine/env/consent';

/** The example configs: resources/configs/*.yaml and resources/examples/<name>/*.yaml. */
export function exampleConfigs(): string[] {
  const res = join(packageRoot(), 'resources');
  const yaml = (dir: string) =>
    readdirSync(dir)
      .filter((f) => /\.ya?ml$/.test(f))
      .map((f) => join(dir, f));
  const examples = readdirSync(join(res, 'examples'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => yaml(join(res, 'examples', d.name)));
  return [...yaml(join(res, 'configs')), ...examples].sort();
}

export interface TrustedManifest {
  version: 1;
  note: string;
  items: { kind: string; label: string; hash: string; from: string[] }[];
}

export async function trustedManifest(): Promise<TrustedManifest> {
  const root = packageRoot();
  const byHash = new Map<string, TrustedManifest['items'][number]>();
  for (const file of exampleConfigs()) {
    const { cfg, dir } = await loadConfig(file, undefined, { warn: () => {} });
    const from = relative(root, file).split('\\').join('/');
    for (const item of configItems(cfg.environment, dir)) {
      const label = item.label.split(root).join('<arbor>');
      const row = byHash.get(item.hash) ?? { kind: item.kind, label, hash: item.hash, from: [] };
      row.from.push(from);
      byHash.set(item.hash, row);
    }
  }
  return {
    version: 1,
    note: "Consent item hashes of what Arbor's own example configs run (engine/env/consent.ts trusts exactly these). Written by `node scripts/gen-trusted-manifest.mjs`; do not edit.",
    items: [...byHash.values()].sort((a, b) => (a.hash < b.hash ? -1 : 1)),
  };
}
