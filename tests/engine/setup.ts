// The engine tests' entry point, as cli/main.ts and server/engine.ts are the engine's: every built-in
// estimator, policy loss, tool-call format and task kind registers itself before a test reads a config.
import '../../engine/builtins';
