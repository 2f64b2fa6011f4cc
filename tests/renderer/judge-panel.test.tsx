// The judge's audit in the group view (renderer/src/views/trajectories/judge/) and the Run view's
// chart section for judge/* metrics.
import { cleanup, render } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { JudgeBadge } from '../../renderer/src/views/trajectories/judge/JudgeBadge';
import { JudgePanel } from '../../renderer/src/views/trajectories/judge/JudgePanel';
import { judgeOf, type JudgeView } from '../../renderer/src/views/trajectories/judge/judge';
import { groupMetricKeys } from '../../renderer/src/lib/metricSections';

afterEach(cleanup);

const call = {
  kind: 'rank' as const,
  order: [2, 0, 1],
  system: 'Rubric: short answers win.',
  prompt: 'Task:\nsay hi\n\n<trajectory 1>\n…',
  answer: '{"scores": [{"trajectory": 1, "score": 0.9}, {"trajectory": 2, "score": 0.1}, {"trajectory": 3, "score": 0.5}]}',
  scores: [0.9, 0.1, 0.5],
  attempts: 2,
  cached: false,
  tokensIn: 300,
  tokensOut: 40,
  seconds: 1.5,
};
const j = (o: Partial<JudgeView>): { sample: number; outcomeData: unknown } => ({
  sample: 0,
  outcomeData: { judge: { mode: 'rank', model: 'judge-7b', ...o } },
});

describe('judge audit', () => {
  it("shows the group's request: the raw answer, which sample each numbered trajectory was, attempts and tokens", () => {
    const group = [
      { ...j({ score: 0.1, rank: 3, of: 3, calls: [call] }), sample: 0 },
      { ...j({ score: 0.5, rank: 2, of: 3 }), sample: 1 },
      { ...j({ score: 0.9, rank: 1, of: 3 }), sample: 2 },
    ];
    const { getByTestId } = render(<JudgePanel group={group} />);
    const panel = getByTestId('judge-panel');
    expect(panel.textContent).toContain('judge-7b');
    expect(panel.textContent).toContain('rank mode');
    expect(getByTestId('judge-answer').textContent).toBe(call.answer);
    expect(getByTestId('judge-call').textContent).toContain('trajectory 1 = sample 2, trajectory 2 = sample 0, trajectory 3 = sample 1');
    expect(getByTestId('judge-call').textContent).toContain('2 attempts · 300 + 40 tokens');
  });

  it('a failed judgement: named in the badge and the panel, never shown as a score', () => {
    const failed = 'malformed answer: the answer is not JSON: "no" (after 3 attempts)';
    const group = [{ ...j({ failed, calls: [{ ...call, answer: 'no', scores: undefined, error: failed }] }), sample: 0 }];
    const { getByTestId, queryByTestId } = render(
      <>
        <JudgePanel group={group} />
        <JudgeBadge judge={judgeOf(group[0]!)!} />
      </>,
    );
    expect(getByTestId('judge-error').textContent).toBe(failed);
    expect(getByTestId('judge-panel').textContent).toContain('1 sample unscored: left out of the update');
    expect(getByTestId('judge-failed').getAttribute('title')).toBe(failed);
    expect(queryByTestId('judge-score')).toBeNull();
  });

  it('shows nothing for a group no judge scored', () => {
    const { container } = render(<JudgePanel group={[{ sample: 0, outcomeData: { components: {} } }]} />);
    expect(container.textContent).toBe('');
  });

  it('judge/* metrics get their own chart section', () => {
    const sections = Object.fromEntries(
      groupMetricKeys(['reward/mean', 'judge/calls', 'judge/tokens', 'judge/cost', 'judge/agreement']).map((g) => [g.title, g.keys]),
    );
    expect(sections.Judge).toEqual(['judge/agreement', 'judge/calls', 'judge/cost', 'judge/tokens']);
  });
});
