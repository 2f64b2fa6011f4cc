/**
 * bench:tool-call's baseline (./tool-calls.ts): the pre-#25 transport, a worker thread that runs
 * a tool in a vm context (engine/env/sandbox-context.ts, as the sandbox process does) and
 * answers one message per call.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { callToolInContext, loadSandboxModule } from '../../engine/env/sandbox-context';

const m = loadSandboxModule(workerData.code as string, 'tools/echo.ts', 5000);
parentPort!.on('message', (req: { id: number; args: unknown }) => {
  parentPort!.postMessage({ id: req.id, started: true });
  callToolInContext(m, 'echo', req.args, 5000, 'tools/echo.ts', { episode: 1 }).then((r) => parentPort!.postMessage({ id: req.id, r }));
});
parentPort!.postMessage({ ready: true });
