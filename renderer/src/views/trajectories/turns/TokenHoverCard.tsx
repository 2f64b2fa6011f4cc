import type { TurnView } from '../../../api/types';

/** The token under the mouse: text, id, and (a generated token) logprob, probability, entropy, advantage, reference logprob, KL; its loss mask. */
export function TokenHoverCard({ turn, index, x, y }: { turn: TurnView; index: number; x: number; y: number }) {
  // Tokens the model did not generate (prompt, observations: loss mask 0) have no sampling values.
  const generated = !turn.lossMask || turn.lossMask[index] !== 0;
  const lp = generated ? turn.logprob?.[index] : undefined;
  const ref = generated ? turn.refLogprob?.[index] : undefined;
  const rows: [string, string][] = [
    ['token', JSON.stringify(turn.tokens[index])],
    ['id', String(turn.tokenIds[index] ?? '—')],
    ['logprob', num(lp)],
    ['prob', lp == null ? '—' : Math.exp(lp).toFixed(4)],
    ['entropy', num(generated ? turn.entropy?.[index] : undefined)],
    ['advantage', num(generated ? turn.advantage?.[index] : undefined)],
    ['ref logprob', num(ref)],
    ['kl (lp−ref)', lp == null || ref == null ? '—' : (lp - ref).toFixed(4)],
    ['loss mask', turn.lossMask ? `${turn.lossMask[index]}${generated ? '' : ' (not generated)'}` : '—'],
  ];
  return (
    <div className="hovercard" style={{ left: Math.min(x + 12, window.innerWidth - 220), top: y + 14 }} data-testid="token-card">
      <table>
        <tbody>
          {rows.map(([k, v]) => (
            <tr key={k}>
              <td className="muted">{k}</td>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function num(v: number | null | undefined): string {
  return v == null || !Number.isFinite(v) ? '—' : v.toFixed(4);
}
