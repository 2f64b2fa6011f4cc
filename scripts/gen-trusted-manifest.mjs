#!/usr/bin/env node
// Writes resources/trusted-manifest.json: the consent item hashes of Arbor's own example configs
// (scripts/trusted-manifest.ts). Run after changing an example's tools, reward, agent or config.
import { writeFileSync } from 'node:fs';
import { register } from 'tsx/esm/api';

register();
const { trustedManifest } = await import('./trusted-manifest.ts');
const { MANIFEST_PATH } = await import('../engine/env/consent.ts');
const m = await trustedManifest();
writeFileSync(MANIFEST_PATH(), `${JSON.stringify(m, null, 2)}\n`);
console.log(`wrote ${MANIFEST_PATH()} (${m.items.length} items)`);
