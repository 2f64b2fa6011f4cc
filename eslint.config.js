// ESLint (flat config) with typescript-eslint, run by `npm test` (scripts/test.mjs) and `npm run lint`.
// Besides the recommended rules (a few turned off where the code base uses the pattern on purpose),
// it holds the project's import boundaries:
//   - renderer code talks to the engine only through its protocol and client
//     (engine/server/protocol.ts, engine/server/client.ts), never engine internals;
//   - the engine never imports the renderer or Electron (it runs as a plain Node process too);
//   - test files live under tests/ only;
//   - the engine's layers (docs/ARCHITECTURE.md §2): no upward import, no import circle
//     (scripts/eslint-layers.mjs: arbor/layers, arbor/no-cycle).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import arborLayers from './scripts/eslint-layers.mjs';

export default tseslint.config(
  { ignores: ['node_modules/', 'renderer/dist/', 'renderer/dist.building-*/', 'dist/', 'release/', 'test-results/', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // The code uses these deliberately: `any` at protocol/ORT seams, `!` after checks the
      // compiler cannot follow, empty catch blocks with a comment, `_`-prefixed unused parameters.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      'no-control-regex': 'off',
      // Errors are rethrown with the file, field or tool in the message (the project's rule); the
      // original error is not always worth carrying along.
      'preserve-caught-error': 'off',
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['renderer/src/api/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)engine/(?!server/(protocol|client)(\\.ts)?$)',
              message: 'renderer code reaches the engine only through engine/server/protocol and engine/server/client',
            },
            { group: ['**/electron/**', 'electron'], message: 'renderer code does not import Electron (the preload bridge is the only way in)' },
          ],
        },
      ],
    },
  },
  {
    // Stores and views see only the ArborApi and its types (renderer/src/api/types.ts): a protocol change touches that adapter alone.
    files: ['renderer/**/*.{ts,tsx}'],
    ignores: ['renderer/src/api/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)engine/',
              message: 'outside renderer/src/api, renderer code reaches the engine only through the ArborApi and its types (api/types.ts)',
            },
            { group: ['**/electron/**', 'electron'], message: 'renderer code does not import Electron (the preload bridge is the only way in)' },
          ],
        },
      ],
    },
  },
  {
    files: ['engine/**/*.{ts,tsx,mjs,js}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/renderer/**'], message: 'the engine never imports renderer code' },
            { group: ['**/electron/**', 'electron'], message: 'the engine never imports Electron code (it also runs as plain Node: CLI, arbor serve)' },
          ],
        },
      ],
    },
  },
  {
    files: ['engine/**/*.{ts,tsx,mts,mjs,js}'],
    plugins: { arbor: arborLayers },
    rules: { 'arbor/layers': 'error' },
  },
  {
    files: ['engine/**/*.{ts,tsx,mts,mjs,js}', 'renderer/src/**/*.{ts,tsx}', 'electron/**/*.{ts,mjs,cjs,js}', 'scripts/**/*.{ts,mjs}'],
    plugins: { arbor: arborLayers },
    rules: { 'arbor/no-cycle': 'error' },
  },
  {
    files: ['engine/**/*.test.*', 'renderer/**/*.test.*', 'electron/**/*.test.*', 'scripts/**/*.test.*', 'resources/**/*.test.*'],
    rules: { 'no-restricted-syntax': ['error', { selector: 'Program', message: 'test files live under tests/ (vitest only collects them there)' }] },
  },
);
