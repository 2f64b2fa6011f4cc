/**
 * The task registry's public face (./kit-registry.ts), with the built-in kinds loaded (./builtins.ts),
 * so every reader of the registry finds them.
 */
import './builtins';

export * from './kit-registry';
