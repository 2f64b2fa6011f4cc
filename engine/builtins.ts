/**
 * The built-in registry entries, loaded by one import: advantage estimators and policy losses
 * (rl/builtins.ts), tool-call formats (env/formats.ts), task kinds (tasks/builtins.ts). Each entry
 * is one module that registers itself with everything about it, exactly as a config's `plugins:`
 * file does (README "Write your own …"). Every entry point imports this file first (cli/main.ts,
 * server/engine.ts), so a config is validated against every built-in name; the config (config/) sits
 * below tasks/ and learns the task kinds only by their registering.
 */
import './rl/builtins';
import './env/formats';
import './tasks/builtins';
