/** A turn whose stored ids differ from its text re-rendered by the tokenizer (retokenisation drift): both sequences. */
export interface TurnDrift {
  stored: number[];
  rendered: number[];
  firstDiff: number;
  /** Drift the agent endpoint recorded: stored = the assistant turn as sampled, rendered = as the agent's request rendered it. */
  endpoint?: { kind: 'template' | 'altered'; message: number; position: number };
}

export function DriftNote({ drift }: { drift: TurnDrift }) {
  const seq = (ids: number[]) =>
    ids.map((id, i) => (
      <span key={i} className={i === drift.firstDiff ? 'diff' : undefined}>
        {id}{' '}
      </span>
    ));
  return (
    <details className="drift-ids" data-testid="turn-drift">
      <summary>
        <span className="flag">drift</span>{' '}
        {drift.endpoint?.kind === 'altered'
          ? `the agent sent back assistant message ${drift.endpoint.message} changed: its ids differ from the sampled ones from token ${drift.firstDiff}, and this trajectory holds the changed text's ids`
          : drift.endpoint
            ? `the chat template re-renders assistant message ${drift.endpoint.message} to other ids from token ${drift.firstDiff}; this trajectory kept the sampled ids`
            : `the stored ids differ from this turn's text re-rendered by the tokenizer, from token ${drift.firstDiff}`}
      </summary>
      <div data-testid="drift-stored">
        {drift.endpoint ? 'sampled' : 'stored'} ({drift.stored.length}): {seq(drift.stored)}
      </div>
      <div data-testid="drift-rendered">
        {drift.endpoint ? 'as the request rendered it' : 're-rendered'} ({drift.rendered.length}): {seq(drift.rendered)}
      </div>
    </details>
  );
}
