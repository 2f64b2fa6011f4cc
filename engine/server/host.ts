/**
 * What a feature's `register<Feature>(engine)` sees of the engine server (server.ts): the method
 * table to add its handlers to, events pushed to every client, the open workspace (its store and
 * run manager, null while no workspace could be opened) and the engine's home folder.
 */
import type { z } from 'zod';
import type { Store } from '../store/store';
import type { api, EventMessage, Method, Result } from './protocol';
import type { RunManager } from './runs';

/** A connected client (a workbench window, a CLI connection): anything that takes a message. */
export interface Client {
  send(message: unknown): void;
}

/** A method's handler: its validated params in, its result out. */
export type Handler<M extends Method> = (params: NonNullable<z.output<(typeof api)[M]['params']>>, client: Client) => Result<M> | Promise<Result<M>>;

export interface EngineHost {
  readonly opts: { readonly home: string };
  /** The open workspace's store and run manager: read them when a handler runs (workspace.open replaces them). */
  readonly store: Store | null;
  readonly runs: RunManager | null;
  /** Add or replace a method's handler. */
  on<M extends Method>(method: M, h: Handler<M>): void;
  /** Push an event to every connected client. */
  broadcast(e: EventMessage): void;
  /** Run `release` when the engine closes (what a feature holds: a loaded model, live rollouts). */
  onClose(release: () => void): void;
}
