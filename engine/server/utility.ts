/**
 * Entry of the engine as an Electron utility process. The main process posts one message
 * carrying a MessagePort (transferred from a MessageChannelMain whose other end went to the
 * renderer); the engine serves the protocol on it. Several ports may arrive (window reloads).
 */
import { arborHome } from '../store/db';
import { attachPort, type PortLike } from './transports';
import { createEngine } from './engine';
import { workbenchAsker } from './consent';
import { setConsentAsker } from '../env/consent';

interface ParentPort {
  on(event: 'message', l: (e: { data: unknown; ports: PortLike[] }) => void): void;
  postMessage(m: unknown): void;
}

const parentPort = (process as unknown as { parentPort?: ParentPort }).parentPort;
if (!parentPort) throw new Error('engine/server/utility.ts must run as an Electron utility process');
const engine = await createEngine({ home: arborHome() });
// Programs a config or stored run would run that the workspace has not approved: the workbench's dialog.
setConsentAsker(workbenchAsker(engine));
parentPort.on('message', (e) => {
  for (const port of e.ports ?? []) attachPort(engine, port);
});
parentPort.postMessage({ type: 'ready', pid: process.pid });
