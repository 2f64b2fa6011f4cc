// Preload (sandboxed, contextIsolation): exposes ONE narrow object, window.arbor, through which
// the renderer exchanges protocol messages with the engine over the MessagePort that main hands
// over, and hears about the engine's state. No Node, no ipcRenderer, no port object leaks to the page.
// Plain CommonJS because sandboxed preloads cannot load ESM or other local files.
'use strict';
const { contextBridge, ipcRenderer } = require('electron');

let port = null;
const queue = [];
const messageListeners = new Set();
const stateListeners = new Set();

ipcRenderer.on('arbor:engine-port', (event) => {
  if (port) port.close();
  port = event.ports[0];
  port.onmessage = (e) => {
    for (const l of messageListeners) l(e.data);
  };
  port.start();
  while (queue.length) port.postMessage(queue.shift());
});

ipcRenderer.on('arbor:engine-state', (_event, state) => {
  if (state && state.state !== 'open' && port) {
    port.close();
    port = null;
  }
  for (const l of stateListeners) l(state);
});

contextBridge.exposeInMainWorld('arbor', {
  kind: 'electron',
  platform: process.platform,
  /** Send one protocol message to the engine (queued until the port arrives). */
  send(message) {
    if (port) port.postMessage(message);
    else queue.push(message);
  },
  /** Listen to protocol messages from the engine; returns an unsubscribe function. */
  onMessage(listener) {
    if (typeof listener !== 'function') throw new TypeError('arbor.onMessage expects a function');
    messageListeners.add(listener);
    return () => messageListeners.delete(listener);
  },
  /** Listen to engine state changes ({state:'open'} | {state:'engine-crashed', message, restarting, attempt}). */
  onEngineState(listener) {
    if (typeof listener !== 'function') throw new TypeError('arbor.onEngineState expects a function');
    stateListeners.add(listener);
    return () => stateListeners.delete(listener);
  },
  /** Ask main for a fresh port (after a reload, or if none arrived). */
  reconnect() {
    ipcRenderer.send('arbor:request-port');
  },
});
