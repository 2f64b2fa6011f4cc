/**
 * The sandbox process's entry (bundled with ./sandbox-child.ts into the file the host starts):
 * it waits for its init on the IPC channel, then hands over to `main`.
 */
import { main, type HostInit } from './sandbox-child';

process.once('message', (m: { init: HostInit }) => {
  main(m.init).catch((e: unknown) => {
    console.error(String((e as Error | undefined)?.stack ?? e));
    process.exit(3);
  });
});
