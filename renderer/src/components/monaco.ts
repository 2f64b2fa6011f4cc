// Monaco, with its workers bundled by Vite (`?worker`) so they load from 'self' under the CSP
// (no eval, no CDN). The editor, TypeScript (tools and rewards) and JSON (MCP server files) workers.
import * as monaco from 'monaco-editor';
import EditorWorker from 'monaco-editor/editor/editor.worker?worker';
import TsWorker from 'monaco-editor/language/typescript/ts.worker?worker';
import JsonWorker from 'monaco-editor/language/json/json.worker?worker';

(self as unknown as { MonacoEnvironment: monaco.Environment }).MonacoEnvironment = {
  getWorker(_id: string, label: string) {
    if (label === 'typescript' || label === 'javascript') return new TsWorker();
    if (label === 'json') return new JsonWorker(); // MCP server files (envs/*.json in the mcpServers layout)
    return new EditorWorker();
  },
};

monaco.typescript.typescriptDefaults.setCompilerOptions({
  target: monaco.typescript.ScriptTarget.ES2020,
  module: monaco.typescript.ModuleKind.ESNext,
  moduleResolution: monaco.typescript.ModuleResolutionKind.NodeJs,
  strict: true,
  allowNonTsExtensions: true,
  noEmit: true,
});

let libs: monaco.IDisposable[] = [];
/** Install the engine's type definitions (Tool, ToolEnv, reward APIs) as extra libs. */
export function setTypeDefinitions(defs: { path: string; content: string }[]) {
  for (const d of libs) d.dispose();
  libs = defs.map((d) =>
    monaco.typescript.typescriptDefaults.addExtraLib(d.content, d.path.startsWith('file://') ? d.path : `file:///${d.path.replace(/^\/+/, '')}`),
  );
}

export { monaco };
