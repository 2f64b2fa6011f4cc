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

// vs-dark with the token colours that fall under 4.5:1 on its #1e1e1e background (WCAG AA) made
// lighter: comments (#608b4e, 4.2:1), regular expressions (#b46695, 4.2:1), annotations and HTML/XML
// delimiters (#808080, 4.2:1), SCSS/Swift operators (#666666).
export const EDITOR_THEME = 'arbor-dark';
monaco.editor.defineTheme(EDITOR_THEME, {
  base: 'vs-dark',
  inherit: true,
  rules: [
    { token: 'comment', foreground: '7ca668' },
    { token: 'regexp', foreground: 'c586a8' },
    { token: 'annotation', foreground: '9a9a9a' },
    { token: 'delimiter.html', foreground: '9a9a9a' },
    { token: 'delimiter.xml', foreground: '9a9a9a' },
    { token: 'metatag.html', foreground: '9a9a9a' },
    { token: 'metatag.xml', foreground: '9a9a9a' },
    { token: 'operator.scss', foreground: '9a9a9a' },
    { token: 'operator.swift', foreground: '9a9a9a' },
  ],
  colors: {},
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
