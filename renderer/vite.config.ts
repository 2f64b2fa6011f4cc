import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';

// The renderer is one static bundle served two ways: by Electron over the app:// protocol and
// by `arbor serve` over HTTP. Relative base so both work; Monaco's workers are bundled as
// separate files (`?worker` imports) so the CSP needs only `worker-src 'self' blob:`.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('./dist', import.meta.url)),
    emptyOutDir: true,
    chunkSizeWarningLimit: 8000,
    sourcemap: false,
  },
  worker: { format: 'es' },
});
