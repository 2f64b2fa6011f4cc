import { defineConfig } from 'vitest/config';

// One runner for everything: engine unit tests (node), renderer unit tests (jsdom),
// and the end-to-end UI tests (node, driving Debian's Chromium through playwright-core).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'engine',
          environment: 'node',
          include: ['tests/engine/**/*.test.ts'],
          // Tests run the CLI on temporary environments: approved as --yes would (engine/env/consent.ts;
          // tests/engine/env/consent.test.ts clears it to see the questions).
          env: { ARBOR_YES: '1' },
          // The built-in registry entries, loaded as the CLI and the server load them (engine/builtins.ts).
          setupFiles: ['tests/engine/setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'renderer',
          environment: 'jsdom',
          include: ['tests/renderer/**/*.test.{ts,tsx}'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          environment: 'node',
          include: ['tests/e2e/**/*.test.ts'],
          // Some e2e files seed their workspace in process (validateConfig): the built-ins first.
          setupFiles: ['tests/engine/setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
