// Types of scripts/eslint-layers.mjs for the tests that import it.
import type { ESLint } from 'eslint';
export declare const TIERS: { name: string; folders: string[]; siblings?: boolean }[];
export declare const LAYERS: string[];
export declare const ALLOWED_UPWARD: { from: string; to: string }[];
declare const plugin: ESLint.Plugin;
export default plugin;
