// Bootstrap for worker threads: registers the TypeScript loader, then imports the module
// named in workerData.__module (an absolute file URL or path of a .ts file).
import { register } from 'tsx/esm/api';
import { workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';

register();
const target = workerData && workerData.__module;
if (!target) throw new Error('worker-bootstrap: workerData.__module is required');
await import(target.startsWith('file:') ? target : pathToFileURL(target).href);
