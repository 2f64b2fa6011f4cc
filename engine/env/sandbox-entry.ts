/**
 * The sandbox process's entry (bundled with ./sandbox-child.ts into the file the host starts):
 * it waits for its init on the IPC channel, then hands over to `main`.
 *
 * The init listener stays attached until `main` has attached its own: Node keeps the IPC channel
 * referenced only while the process has a 'message' listener, and an awaited WebAssembly compile
 * does not keep the event loop alive on every Node line (on Node 24 a `once` listener let the
 * process exit with code 0 while QuickJS compiled).
 */
import { main, type HostInit } from './sandbox-child';

// `process` is taken from the global scope when the sandbox locks down: keep this file's own handle.
const proc = process;
let started = false;
const onInit = (m: { init?: HostInit }) => {
  if (started || !m || typeof m !== 'object' || !m.init) return;
  started = true;
  main(m.init).then(
    () => proc.off('message', onInit),
    (e: unknown) => {
      console.error(String((e as Error | undefined)?.stack ?? e));
      proc.exit(3);
    },
  );
};
proc.on('message', onInit);
