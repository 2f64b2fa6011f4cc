import { PromptDialog } from '../../components/PromptDialog';

/** What the New tool / reward / MCP servers buttons ask: the dialog's title, the suggested path, the new file's text. */
export interface NewFileAsk {
  title: string;
  initial: string;
  template: string;
}

/** Asks for the workspace path of a new tool, reward or MCP servers file (the engine checks it on save and names what is wrong). */
export function NewFileDialog({ ask, onCreate, onClose }: { ask: NewFileAsk; onCreate: (path: string) => void; onClose: () => void }) {
  return <PromptDialog title={ask.title} label="Workspace path" initial={ask.initial} okLabel="Create" onSubmit={onCreate} onClose={onClose} />;
}
