import { useId, useState } from 'react';
import { Modal } from './Modal';

/** Asks for one line of text (what window.prompt did); onSubmit gets the trimmed value. */
export function PromptDialog({
  title,
  label,
  initial = '',
  okLabel = 'OK',
  onSubmit,
  onClose,
}: {
  title: string;
  label: string;
  initial?: string;
  okLabel?: string;
  onSubmit: (value: string) => void;
  onClose: () => void;
}) {
  const [value, setValue] = useState(initial);
  const fieldId = useId();
  const trimmed = value.trim();
  const submit = () => {
    if (!trimmed) return;
    onSubmit(trimmed);
    onClose();
  };
  return (
    <Modal title={title} onClose={onClose} testId="prompt-dialog">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
        style={{ display: 'flex', flexDirection: 'column', gap: 8 }}
      >
        <label htmlFor={fieldId}>{label}</label>
        <input
          id={fieldId}
          value={value}
          onChange={(e) => setValue(e.target.value)}
          data-testid="prompt-input"
          aria-invalid={!trimmed}
          autoFocus
          className="mono"
        />
        <div className="toolbar">
          <span className="grow" />
          <button type="button" onClick={onClose} data-testid="prompt-cancel">
            Cancel
          </button>
          <button type="submit" className="primary" disabled={!trimmed} data-testid="prompt-ok">
            {okLabel}
          </button>
        </div>
      </form>
    </Modal>
  );
}
