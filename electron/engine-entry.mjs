// The engine utility process: registers tsx, then runs the engine's MessagePort server
// (engine/server/utility.ts), which takes the port that main posts as {type:'arbor:connect'}.
import { register } from 'tsx/esm/api';

register();
await import(new URL('../engine/server/utility.ts', import.meta.url).href);
