// In-app dialogs. Electron does not implement window.prompt() (it throws), so every question the
// workbench asks is one of these: a modal with a labelled field, OK/Cancel, Enter accepts, Escape
// closes, focus starts in the field and returns to where it was.
import './dialog.css';
import { useEffect, useId, useRef, type ReactNode } from 'react';

/**
 * A modal frame: backdrop click and Escape close it; focus moves in and comes back on close. The body
 * scrolls; the footer (where the dialog's main button goes) stays in view however long the body is.
 */
export function Modal({
  title,
  onClose,
  children,
  footer,
  closeButton,
  testId,
}: {
  title: ReactNode;
  onClose: () => void;
  children: ReactNode;
  footer?: ReactNode;
  /** a Close button in the header (dialogs without their own Cancel) */
  closeButton?: boolean;
  testId?: string;
}) {
  const titleId = useId();
  const box = useRef<HTMLDivElement>(null);
  // The latest onClose, so the mount effect below runs once (callers pass a fresh arrow each render).
  const close = useRef(onClose);
  close.current = onClose;
  // Where focus was when the dialog opened (read while rendering: a field's autoFocus moves it before effects run).
  const before = useRef(document.activeElement as HTMLElement | null);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.stopPropagation();
        close.current();
      }
    };
    window.addEventListener('keydown', onKey, true);
    // Focus the first field (or the box) unless something inside already has it.
    if (box.current && !box.current.contains(document.activeElement)) {
      const first = box.current.querySelector<HTMLElement>('input, select, textarea');
      (first ?? box.current).focus();
    }
    return () => {
      window.removeEventListener('keydown', onKey, true);
      before.current?.focus?.();
    };
  }, []);
  return (
    <div className="modal-back" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className="modal modal-framed" role="dialog" aria-modal="true" aria-labelledby={titleId} tabIndex={-1} ref={box} data-testid={testId}>
        <div className="toolbar modal-head">
          <h2 id={titleId}>{title}</h2>
          <span className="grow" />
          {closeButton ? (
            <button type="button" onClick={onClose} data-testid="modal-close">
              Close
            </button>
          ) : null}
        </div>
        <div className="modal-body">{children}</div>
        {footer ? <div className="toolbar modal-foot">{footer}</div> : null}
      </div>
    </div>
  );
}
