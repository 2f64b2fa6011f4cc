import { useArbor } from '../../../store/react';

/** The runs that began from this SFT warm start (the RL run), each a link that opens it. */
export function ChildLinks({ id }: { id: string }) {
  const children = useArbor((s) => s.runList.runs).filter((r) => r.parentId === id);
  const openRun = useArbor((s) => s.runActions.open);
  if (!children.length) return <span className="muted">no RL run recorded from it</span>;
  return (
    <>
      {children.map((c, i) => (
        <span key={c.id}>
          {i ? ', ' : ''}
          <strong>RL</strong> in run{' '}
          <a
            href="#"
            data-testid="sft-child-link"
            onClick={(e) => {
              e.preventDefault();
              void openRun(c.id);
            }}
          >
            {c.name}
          </a>{' '}
          <span className="muted">
            ({c.status}, step {c.step})
          </span>
        </span>
      ))}
    </>
  );
}
