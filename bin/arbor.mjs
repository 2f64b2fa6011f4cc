#!/usr/bin/env node
// Entry point of the `arbor` CLI. The engine is TypeScript run through tsx's loader, so the
// same sources serve the CLI, the tests, `arbor serve` and the Electron utility process.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../engine/cli/main.ts');
await main(process.argv.slice(2));
